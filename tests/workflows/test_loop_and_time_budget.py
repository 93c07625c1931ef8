"""Two branches a review found untested: a plain tool loop whose answer is cut short goes
on (the cut part is no answer), and a time budget (`RunBudget(seconds=...)`) stops the
next tool call at its limit and asks a person. Scripted model, time-skipping server."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agents import RunBudget
from durable_agents.examples.refund import refund_agent
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from durable_agents.workflows import prompts
from tests.delegation.agents import research
from tests.delegation.test_budget import budget_request


@pytest.fixture(scope="module")
def time_env(own_time_env: WorkflowEnvironment) -> WorkflowEnvironment:
    """This module moves the clock: a server of its own (conftest `own_time_env`)."""
    return own_time_env


async def test_a_plain_loops_cut_short_answer_goes_on(time_env):
    model = ScriptedModel(
        [
            say("Refunded 20.00 EUR to c@shop.exa", finish_reason="length"),
            say("mple, case closed."),
        ]
    )
    async with AgentTestbed(refund_agent, model=model, env=time_env) as bed:
        run = await bed.start("refund", "Say what was refunded")
        result = await run.result()
    assert result.status == "completed"
    # Both parts make the answer: the cut one alone did not end the loop.
    assert result.final_answer == "Refunded 20.00 EUR to c@shop.exa mple, case closed."
    asked = [m["content"] for m in model.requests[1].messages if m["role"] == "user"]
    assert any(prompts.FINAL_CUT_SHORT.format(reason="length") in text for text in asked)
    assert len(model.requests) == 2


async def test_a_time_budget_stops_the_next_call_and_asks_a_person(time_env):
    model = ScriptedModel(
        [call("ask_human", question="Which topic?"), call("look_up", topic="a"), say("Done.")]
    )
    async with AgentTestbed(research, model=model, env=time_env) as bed:
        run = await bed.start("research", "Look something up", budget=RunBudget(seconds=60))
        await run.next_question()
        # While the run waits durably, 90 s of its time pass (skipped, not slept).
        await time_env.sleep(timedelta(seconds=90))
        await run.answer("a", by="cfo")
        asked = await budget_request(run)
        state = await run.state()
        await run.reject(asked.request_id, by="cfo", comment="out of time")
        result = await run.result()
    assert "its time (60 s) is up" in asked.rule
    assert state.tool_calls == 0  # the look-up was not made
    assert result.status == "cancelled"
