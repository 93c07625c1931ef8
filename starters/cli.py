"""agentctl: the command line. Thin: each verb calls one client-side function."""

from __future__ import annotations

import contextlib

import typer
from pydantic import ValidationError

from durable_agents.runtime import exiting, telemetry
from durable_agents.runtime.extras import ExtraMissing
from durable_agents.runtime.settings import SettingsInvalid, load_settings
from durable_agents.starters import (
    cli_chat,
    cli_console,
    cli_history,
    cli_memory,
    cli_ops,
    cli_people,
    cli_release,
    cli_runs,
    cli_schedule,
    cli_stack,
    cli_whatif,
)
from durable_agents.starters.demo import demo

app = typer.Typer(
    help="Durable AI agents on Temporal: start, watch, approve and inspect runs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
cli_stack.register(app)
cli_runs.register(app)
cli_people.register(app)
cli_history.register(app)
cli_ops.register(app)
cli_console.register(app)
cli_schedule.register(app)
cli_release.register(app)
cli_chat.register(app)
cli_memory.register(app)
cli_whatif.register(app)
app.command()(demo)


def main() -> None:
    """Run a command, then leave without interpreter finalization (see `exiting.leave`):
    every command has finished its work and its output by then."""
    _trace_if_asked()
    try:
        app()
        exit_code = 0
    except SystemExit as done:
        exit_code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except (SettingsInvalid, ExtraMissing) as err:  # from a command that is not run_async's
        typer.echo(f"error: {err}", err=True)
        exit_code = 1
    exiting.leave(exit_code)


def _trace_if_asked() -> None:
    """The starter's spans (start, signal, update) begin the run's trace."""
    # Settings it cannot use are reported by the command itself.
    with contextlib.suppress(ValidationError, ValueError):
        telemetry.install_tracing(load_settings())
