"""The budget's figures have one set of bounds (contract_base.BudgetLimits): a person's
raise or the console's form past them is refused; a budget a run took before the token and
tool-call figures had upper bounds reads at the bound, so that run still replays."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from durable_agents.workflows.contract_base import MAX_TOKENS, MAX_TOOL_CALLS
from durable_agents.workflows.contracts import RunBudget, RunRequest
from durable_agents.workflows.people_inputs import BudgetRaise


def test_a_raise_past_the_bounds_is_refused():
    with pytest.raises(ValidationError, match="less than or equal to 1000000000000"):
        BudgetRaise(by="alice", tokens=MAX_TOKENS + 1)
    with pytest.raises(ValidationError):
        BudgetRaise(by="alice", tool_calls=MAX_TOOL_CALLS + 1)


def test_a_budget_taken_before_the_bounds_reads_at_the_bound():
    recorded = {"goal": "g", "budget": {"tokens": 10**15, "tool_calls": 10**12, "usd": 1.0}}
    request = RunRequest.model_validate(recorded)
    assert request.budget == RunBudget(tokens=MAX_TOKENS, tool_calls=MAX_TOOL_CALLS, usd=1.0)
    with pytest.raises(ValidationError):
        RunBudget(usd=10**7)  # the other figures' bounds hold as they always did
