"""Turn every failure a person can cause into one line on stderr and a non-zero exit."""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from pydantic import ValidationError
from temporalio.service import RPCError

from durable_agents.control.errors import one_line
from durable_agents.control.runs import RunError, check_run_id
from durable_agents.infra.binaries import BinaryMissing
from durable_agents.infra.offline_model.scenarios import ScenarioError
from durable_agents.infra.processes import StackError
from durable_agents.runtime.connection import ConnectionSettingsError
from durable_agents.runtime.encryption import KeyringError
from durable_agents.runtime.extras import ExtraMissing
from durable_agents.runtime.settings import SettingsFileMissing, SettingsInvalid

P = ParamSpec("P")
R = TypeVar("R")


def fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def _exits() -> tuple[type[Exception], ...]:
    """How a command chooses its exit code: typer's Exit, and click's where typer is built
    on click (older typer releases; click is no dependency of ours)."""
    try:
        import click
    except ModuleNotFoundError:
        return (typer.Exit,)
    return (typer.Exit, click.exceptions.Exit)


EXITS = _exits()

KNOWN = (
    RunError,
    ConnectionSettingsError,
    StackError,
    KeyringError,
    SettingsFileMissing,
    SettingsInvalid,
    ScenarioError,
    BinaryMissing,
    ExtraMissing,
    ValidationError,
    RPCError,
    RuntimeError,
)


def run_async(fn: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, R]:
    """Run a coroutine command; known errors become `error: ...` and exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return asyncio.run(fn(*args, **kwargs))
        except EXITS:
            raise  # the command chose its exit code (a RuntimeError to click: not an error)
        except KNOWN as err:
            # StackError messages may carry a log tail after the first line: keep it.
            first, _, rest = one_line(err).partition("\n")
            typer.echo(f"error: {first}", err=True)
            if rest:
                typer.echo(rest, err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper


def _checked_run_id(value: str) -> str:
    try:
        return check_run_id(value)
    except RunError as err:
        raise fail(str(err)) from None


# A verb's RUN_ID argument, refused in one line before anything connects.
RunIdArgument = Annotated[str, typer.Argument(help="The run's id.", callback=_checked_run_id)]
