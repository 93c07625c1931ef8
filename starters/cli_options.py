"""The start options as `agentctl` flags: one definition each (`START_FLAGS`, a flag for
every StartOptions field), which `start_flags` gives `run`, `schedule create` and `chat`
alike (durable_agents.StartOptions is what they make): an option added there is a flag of
each."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError

from durable_agents.control.agents import start_options
from durable_agents.control.runs import RunError
from durable_agents.runtime import operator_files
from durable_agents.workflows.contract_base import first_problem
from durable_agents.workflows.contracts import RunBudget, RunLimits, RunPolicy
from durable_agents.workflows.start_options import StartOptions

PolicyFile = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help="The run's policy: a JSON or TOML file; it may only tighten the agent's.",
    ),
]
LimitsFile = Annotated[
    Path | None,
    typer.Option("--limits", help="The run's limits: a JSON or TOML file (default: the agent's)."),
]
BudgetFile = Annotated[
    Path | None,
    typer.Option(
        "--budget",
        help="What the run and its sub-agents may spend: a JSON or TOML file "
        "(usd, tokens, tool_calls, seconds; default: the agent's).",
    ),
]
Subject = Annotated[
    list[str] | None,
    typer.Option(
        "--subject", help="What the run is about, KEY=VALUE (repeatable): its memory's owner."
    ),
]
Label = Annotated[str | None, typer.Option("--label", help="A label each run carries.")]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
# The start flags' values, by option name, as `start_flags` hands them to a command.
Flags = dict[str, Any]


def read_model_file(path: Path, model: type[M], flag: str) -> M:
    """A policy, limits or budget file (JSON, or TOML by its suffix), validated before any
    start; read only up to runtime.operator_files' cap (/dev/zero is refused too)."""
    try:
        data = operator_files.load_json_or_toml(path)
    except OSError as err:
        raise RunError(f"{flag} {path}: {err.strerror or err}") from None
    except ValueError as err:
        raise RunError(f"{flag} {path}: {err}") from None
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise RunError(f"{flag} {path}: {first_problem(err, '(top level)')}") from None


def parse_subject(pairs: list[str]) -> dict[str, str] | None:
    """`--subject customer=jane` as the run's subject; RunError on a pair without `=` or
    a key given twice."""
    subject: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not value:
            raise RunError(f"--subject takes KEY=VALUE, not {pair!r}")
        if key in subject:
            raise RunError(f"--subject names {key!r} twice")
        subject[key] = value
    return subject or None


@dataclass(frozen=True)
class Flag:
    """A start option's flag: its typer parameter, and what a value given becomes."""

    parameter: Any
    read: Callable[[Any], Any]


# One flag per StartOptions field (tests/docs/test_change_map.py holds the two equal), read
# in this order: the label as given, the files, then the subject's pairs.
START_FLAGS: dict[str, Flag] = {
    "label": Flag(Label, lambda label: label),
    "policy": Flag(PolicyFile, lambda path: read_model_file(path, RunPolicy, "--policy")),
    "limits": Flag(LimitsFile, lambda path: read_model_file(path, RunLimits, "--limits")),
    "budget": Flag(BudgetFile, lambda path: read_model_file(path, RunBudget, "--budget")),
    "subject": Flag(Subject, parse_subject),
}


def options_from_flags(**flags: Any) -> StartOptions:
    """The flags' start options (by option name; a flag not given is None), each file read
    and checked, or RunError in one line."""
    return start_options(
        **{
            name: START_FLAGS[name].read(value)
            for name, value in flags.items()
            if value is not None
        }
    )


def start_flags(command: Callable[..., T]) -> Callable[..., T]:
    """`command` with a flag for each start option it does not declare itself (after its
    own parameters, in START_FLAGS' order); it is called with their values as `flags`, a
    keyword-only parameter it declares (`options_from_flags(**flags)` makes the options)."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "flags"]
    added = [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=flag.parameter
        )
        for name, flag in START_FLAGS.items()
        if name not in signature.parameters
    ]

    @functools.wraps(command)
    def with_flags(*args: Any, **kwargs: Any) -> T:
        flags = {p.name: kwargs.pop(p.name, None) for p in added}
        return command(*args, flags=flags, **kwargs)

    parameters = [*own, *added]
    # What typer reads the command's flags from.
    with_flags.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    with_flags.__annotations__ = {p.name: p.annotation for p in parameters}
    return with_flags
