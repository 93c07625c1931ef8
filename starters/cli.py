"""agentctl: the command line. Thin: each verb calls one client-side function."""

from __future__ import annotations

import typer

from starters import cli_runs, cli_stack
from starters.demo import demo

app = typer.Typer(
    help="Durable AI agents on Temporal: start, watch, approve and inspect runs.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
cli_stack.register(app)
cli_runs.register(app)
app.command()(demo)


def main() -> None:
    app()
