"""Typed across the border: `run_agent(agent, goal)` returns the agent's declared answer
type, an `output_type` that is not the agent's is refused before the agent's run starts
(no child in the caller's history), and a workflow module imports run_agent's errors and
RunResult from `durable_agents` inside Temporal's sandbox (tests/calling/typed_border.py,
which the project's mypy run also checks for the mismatch)."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType

from durable_agents.testing import AgentTestbed, ScriptedModel, say
from tests.calling.billing import triage
from tests.calling.typed_border import (
    AsksByNameForAnotherType,
    AsksForAnotherType,
    AsksTheAgentsOwnType,
)

ANSWER = '{"refund": true, "priority": "high"}'
OWN = [AsksTheAgentsOwnType, AsksForAnotherType, AsksByNameForAnotherType]


async def test_the_agents_answer_comes_typed_without_asking(own_clock):
    model = ScriptedModel([say(ANSWER)])
    async with AgentTestbed(triage, model=model, env=own_clock, workflows=OWN) as bed:
        said = await bed.temporal.execute_workflow(
            AsksTheAgentsOwnType.run, "Charged twice", id="own-type", task_queue=bed.task_queue
        )
    assert said == ["TriageDecision", "high", "high", "completed"]


async def test_another_output_type_is_refused_before_the_agent_runs(own_clock):
    model = ScriptedModel([say(ANSWER)])
    async with AgentTestbed(triage, model=model, env=own_clock, workflows=OWN) as bed:
        said = await bed.temporal.execute_workflow(
            AsksForAnotherType.run, "Charged twice", id="other-type", task_queue=bed.task_queue
        )
        by_name = await bed.temporal.execute_workflow(
            AsksByNameForAnotherType.run, "Charged", id="other-by-name", task_queue=bed.task_queue
        )
        histories = [
            await bed.temporal.get_workflow_handle(run_id).fetch_history()
            for run_id in ("other-type", "other-by-name")
        ]
    expected = (
        "refused: agent 'triage' answers TriageDecision, not Verdict: ask for "
        "output_type=TriageDecision, or leave output_type out"
    )
    assert said == by_name == expected
    started = EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    assert [e for h in histories for e in h.events if e.event_type == started] == []
    assert model.requests == []  # no model call, no tool: nothing of the agent ran
