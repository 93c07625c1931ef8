"""The start options as `agentctl` flags: one definition each, taken by `run`,
`schedule create` and `chat` alike (durable_agents.StartOptions is what they make)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from pydantic import BaseModel, ValidationError

from durable_agents.control.agents import start_options
from durable_agents.control.runs import RunError
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

M = TypeVar("M", bound=BaseModel)


def read_model_file(path: Path, model: type[M], flag: str) -> M:
    """A policy, limits or budget file (JSON, or TOML by its suffix), validated before any
    start."""
    try:
        text = path.read_text()
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except OSError as err:
        raise RunError(f"{flag} {path}: {err.strerror or err}") from None
    except (ValueError, tomllib.TOMLDecodeError) as err:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise RunError(f"{flag} {path}: not valid {kind}: {err}") from None
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


def options_from_flags(
    *,
    policy: Path | None = None,
    limits: Path | None = None,
    budget: Path | None = None,
    label: str | None = None,
    subject: list[str] | None = None,
) -> StartOptions:
    """The flags' start options, each file read and checked, or RunError in one line."""
    return start_options(
        policy=read_model_file(policy, RunPolicy, "--policy") if policy else None,
        limits=read_model_file(limits, RunLimits, "--limits") if limits else None,
        budget=read_model_file(budget, RunBudget, "--budget") if budget else None,
        label=label,
        subject=parse_subject(subject or []),
    )
