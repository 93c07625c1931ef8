"""An agent's declared budget and limits are floors, like its policy: a start, a Schedule,
a conversation or a fork may only tighten them. A request's figure above the agent's is
refused in one line; one it leaves out is the agent's; a sub-agent takes the tighter of
what its parent hands it and its own agent's."""

from __future__ import annotations

from typing import Any, Literal

from durable_agents.workflows.contract_base import BudgetLimits
from durable_agents.workflows.contracts import RunBudget, RunLimits

# Every field of RunLimits and how a request may move it from the agent's declared value
# ("lower": only lower, a tighter guard; "free": not a guard a run could use to do more).
# A field added to RunLimits without a row here fails tests/workflows/test_floors.py.
LIMIT_FLOORS: dict[str, Literal["lower", "free"]] = {
    "max_turns_per_step": "lower",
    "max_plan_attempts": "lower",
    "model_timeout_seconds": "lower",
    "model_max_attempts": "lower",
    "tool_timeout_seconds": "lower",
    "continue_as_new_after_events": "free",  # when the history is cut, not what runs
    "context": "free",  # what the model sees of the run, not what it may do
    "steps_end": "free",  # how a step ends; the turn limit still holds
}


def budget_within(requested: RunBudget | None, declared: RunBudget | None) -> RunBudget | None:
    """The run's budget: each figure the request gives, where it is at most the agent's,
    and the agent's where the request gives none. Raises FloorLoosened otherwise."""
    if declared is None:
        return requested
    if requested is None:
        return declared
    taken = dict(declared.limits())
    for name, wanted in requested.limits().items():
        ceiling = taken.get(name)
        if ceiling is not None and wanted > ceiling:
            raise FloorLoosened(
                f"the requested budget loosens the agent's: {name} must be {ceiling} or less"
            )
        taken[name] = wanted
    return RunBudget(**taken)


def limits_within(requested: RunLimits | None, declared: RunLimits | None) -> RunLimits | None:
    """The run's limits: the request's figures that only tighten the agent's (the ones
    it set; its defaults are not asks), the agent's for the rest."""
    if declared is None:
        return requested
    if requested is None:
        return declared
    taken: dict[str, Any] = declared.model_dump()
    for name in requested.model_fields_set:
        wanted, ceiling = getattr(requested, name), getattr(declared, name)
        if LIMIT_FLOORS[name] == "lower" and ceiling is not None and wanted > ceiling:
            raise FloorLoosened(
                f"the requested limits loosen the agent's: {name} must be {ceiling} or less"
            )
        taken[name] = wanted
    return RunLimits(**taken)


def tighter_budget(handed: RunBudget | None, declared: RunBudget | None) -> RunBudget | None:
    """A sub-agent's budget: the tighter, figure by figure, of what its parent hands it
    (the parent's remaining budget) and what its own agent declares."""
    if handed is None or declared is None:
        return handed or declared
    figures = {}
    for name in BudgetLimits.model_fields:
        mine, theirs = getattr(handed, name), getattr(declared, name)
        figures[name] = theirs if mine is None else mine if theirs is None else min(mine, theirs)
    return RunBudget(**figures)


class FloorLoosened(ValueError):
    """A request that loosens the agent's declared budget or limits."""
