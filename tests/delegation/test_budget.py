"""One budget for a run and its sub-agents: spent, the run waits for a person, who raises
it (the run goes on) or rejects (the run stops). Time-skipping server, scripted model."""

from __future__ import annotations

import re

import pytest

from durable_agents import RunBudget, RunPolicy
from durable_agents.control import runs
from durable_agents.control.runs import RunError
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from durable_agents.workflows.people_inputs import BudgetRaise, DecideRequest
from durable_agents.workflows.records import BUDGET_REQUEST
from tests.conftest import eventually
from tests.delegation.agents import model_with_a_report, research, triage


def three_lookups() -> ScriptedModel:
    return ScriptedModel(
        [
            call("look_up", topic="a"),
            call("look_up", topic="b"),
            call("look_up", topic="c"),
            say("Three topics looked up."),
        ]
    )


async def budget_request(handle, within: float = 30.0):
    async def asked():
        summary = await handle.summary()
        return next((a for a in summary.pending_approvals if a.tool == BUDGET_REQUEST), None)

    return await eventually(asked, within=within)


async def test_a_run_waits_at_its_tool_call_budget_and_goes_on_when_raised(time_env):
    async with AgentTestbed(research, model=three_lookups(), env=time_env) as bed:
        run = await bed.start("research", "Look up a, b, c", budget=RunBudget(tool_calls=2))
        asked = await budget_request(run)
        state = await run.state()
        with pytest.raises(RunError, match="not approved but raised"):
            await run.approve(asked.request_id, by="cfo")
        with pytest.raises(RunError, match="below what is spent"):
            await runs.raise_budget(
                bed.client.temporal, run.run_id, BudgetRaise(by="cfo", tool_calls=1)
            )
        new = await runs.raise_budget(
            bed.client.temporal, run.run_id, BudgetRaise(by="cfo", tool_calls=3)
        )
        result = await run.result()
        final = await run.state()
    assert state.tool_calls == 2 and [r.tool for r in state.results] == ["look_up"] * 2
    assert asked.arguments["spent"]["tool_calls"] == 2
    assert "2 of 2 tool calls are made" in asked.rule
    assert new.tool_calls == 3
    assert result.status == "completed" and final.tool_calls == 3
    assert result.spent is not None and result.spent.tool_calls == 3
    assert any(e.action == "budget_raised" and e.actor == "cfo" for e in final.audit)


async def test_rejecting_the_budget_request_stops_the_run(time_env):
    async with AgentTestbed(research, model=three_lookups(), env=time_env) as bed:
        run = await bed.start("research", "Look up", budget=RunBudget(tool_calls=1))
        asked = await budget_request(run)
        await run.reject(asked.request_id, by="cfo", comment="enough")
        result = await run.result()
        state = await run.state()
    assert result.status == "cancelled"
    assert state.cancel_requested_by == "cfo" and state.tool_calls == 1


async def test_a_dollar_budget_stops_model_calls_at_the_limit(time_env):
    bed = AgentTestbed(research, model=three_lookups(), env=time_env)
    bed.settings.price_input_per_mtok = 1_000_000.0  # a dollar a token: easy sums
    async with bed:
        run = await bed.start("research", "Look up", budget=RunBudget(usd=8))
        asked = await budget_request(run)
        state = await run.state()
        await runs.raise_budget(bed.client.temporal, run.run_id, BudgetRaise(by="cfo", usd=500))
        result = await run.result()
    found = re.search(r"about \$([0-9.]+)", asked.rule)
    assert found is not None, asked.rule
    estimate = float(found.group(1))
    assert state.spent.usd <= 8 < state.spent.usd + estimate  # stopped before passing it
    assert asked.arguments["budget"] == {"usd": 8.0}
    assert result.status == "completed"


async def test_the_tree_shares_one_budget_and_a_raise_at_the_parent_reaches_the_child(time_env):
    model = model_with_a_report()
    async with AgentTestbed(triage, model=model, env=time_env) as bed:
        # the delegation is the tree's first tool call, the child's look_up its second
        run = await bed.start("triage", "Ticket 11", budget=RunBudget(tool_calls=2))
        [delegation] = (await eventually(lambda: _delegated(run))).delegations
        child = bed.client.run(delegation.child_id)
        asked = await budget_request(child)
        child_state = await child.state()
        parent_live = await eventually(lambda: _rolled_up(run, 2))
        summary = await run.summary()
        await runs.raise_budget(
            bed.client.temporal, run.run_id, BudgetRaise(by="cfo", tool_calls=5)
        )
        result = await run.result()
        parent = await run.state()
        child_after = await child.state()
    assert child_state.budget == RunBudget(tool_calls=1)  # what was left when it began
    assert "1 of 1 tool calls" in asked.rule
    assert parent_live.spent.tool_calls == 2  # rolled up while the child waited
    # The child's reports carry a token only the two workflows hold: no query hands it out.
    assert delegation.report_token is None and summary.delegations[0].report_token is None
    assert child_state.delegated_by is not None and child_state.delegated_by.report_token is None
    assert child_after.budget is not None and child_after.budget.tool_calls == 4
    assert result.status == "completed"
    assert parent.spent.tool_calls == 3 and parent.delegations[0].spent.tool_calls == 2
    assert result.spent is not None and result.spent.tokens == parent.spent.tokens > 0


async def _delegated(run):
    state = await run.state()
    return state if state.delegations else None


async def _rolled_up(run, calls: int):
    state = await run.state()
    return state if state.spent.tool_calls == calls else None


async def test_a_budget_needs_someone_the_policy_allows(time_env):
    policy = RunPolicy(approvers={BUDGET_REQUEST: ["cfo"]})
    async with AgentTestbed(research, model=three_lookups(), env=time_env) as bed:
        run = await bed.start("research", "Look up", budget=RunBudget(tool_calls=1), policy=policy)
        await budget_request(run)
        with pytest.raises(RunError, match="intern may not change this run's budget"):
            await runs.raise_budget(
                bed.client.temporal, run.run_id, BudgetRaise(by="intern", tool_calls=9)
            )
        with pytest.raises(RunError, match="give a new limit"):
            await runs.raise_budget(bed.client.temporal, run.run_id, BudgetRaise(by="cfo"))
        await runs.decide(bed.client.temporal, run.run_id, DecideRequest(approve=False, by="cfo"))
        assert (await run.result()).status == "cancelled"
