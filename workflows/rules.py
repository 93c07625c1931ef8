"""An agent's own approval rules: a pure function of the call under review, run in workflow
code, or an evaluator run as an activity (a policy service, a model); each says approve,
deny or ask, and the gate (workflows/phases/gate.py) applies them in order."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict

from durable_agents.workflows.tools import (
    ToolRisk,
)

VerdictKind = Literal["approve", "deny", "ask"]


@dataclass(frozen=True)
class Verdict:
    """A rule's answer about one tool call, with the reason people and the model read."""

    decision: VerdictKind
    reason: str

    @classmethod
    def approve(cls, reason: str) -> Verdict:
        return cls("approve", reason)

    @classmethod
    def deny(cls, reason: str) -> Verdict:
        return cls("deny", reason)

    @classmethod
    def ask(cls, reason: str) -> Verdict:
        return cls("ask", reason)


class CallToReview(BaseModel):
    """What an approval rule sees: the call, and where the run stands."""

    model_config = ConfigDict(frozen=True)

    tool: str
    arguments: dict[str, Any]
    risk: ToolRisk
    goal: str
    step: int
    spent_usd: float
    effects_so_far: int


# A pure function evaluated in workflow code: no I/O, no clock, no randomness.
Rule = Callable[[CallToReview], Verdict | None]


@dataclass(frozen=True, eq=False)
class Evaluator:
    """A rule run as an activity (a policy service, a model as judge); its verdict is
    recorded in the history, so a replay never asks again."""

    name: str
    fn: Callable[[CallToReview], Verdict | Awaitable[Verdict]] = field(repr=False)
    timeout: timedelta = timedelta(seconds=30)


@overload
def evaluator(fn: Callable[[CallToReview], Any], /) -> Evaluator: ...


@overload
def evaluator(
    *, name: str | None = None, timeout: float = 30.0
) -> Callable[[Callable[[CallToReview], Any]], Evaluator]: ...


def evaluator(
    fn: Callable[[CallToReview], Any] | None = None,
    /,
    *,
    name: str | None = None,
    timeout: float = 30.0,
) -> Evaluator | Callable[[Callable[[CallToReview], Any]], Evaluator]:
    """Declare an approval rule that runs as an activity (sync or async)."""

    def declare(function: Callable[[CallToReview], Any]) -> Evaluator:
        return Evaluator(
            name=name or function.__name__, fn=function, timeout=timedelta(seconds=timeout)
        )

    return declare(fn) if fn is not None else declare


def rule_name(rule: Rule | Evaluator) -> str:
    return rule.name if isinstance(rule, Evaluator) else getattr(rule, "__name__", "rule")


def verdict_of(value: object, rule: str) -> Verdict:
    if isinstance(value, Verdict) and value.decision in ("approve", "deny", "ask"):
        return value
    raise TypeError(f"approval rule {rule!r} returned {value!r}, not a Verdict")
