"""Typed across the border: `run_agent(agent, goal)` returns the agent's declared answer
type, an `output_type` that is not the agent's is refused before the agent's run starts
(no child in the caller's history), and a workflow module imports run_agent's errors and
RunResult from `durable_agents` inside Temporal's sandbox (tests/calling/typed_border.py,
which the project's mypy run also checks for the mismatch). Also: the sandbox's own copy
of the answer model is the agent's type; a call of an agent on another task queue (whose
worker would refuse the run) and one asking an agent of free text for a model are
refused before anything starts.

A broken check can fail the caller's workflow task on every try instead of failing the
workflow (an AttributeError in workflow code is a task failure, retried): each caller
runs under CALLER_TIMEOUT, so such a break fails the test instead of hanging it. The
time-skipping server skips no time while a workflow task is pending, so there that
timeout runs in real time: a bound far over the second these calls take."""

from __future__ import annotations

from datetime import timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from durable_agents.testing import AgentTestbed, ScriptedModel, say
from tests.calling.billing import triage
from tests.calling.more_agents import assess, notes
from tests.calling.sandbox_copy import AsksWithItsOwnCopyOfTheType
from tests.calling.typed_border import (
    AsksAnotherQueue,
    AsksByNameForAnotherType,
    AsksForAnotherType,
    AsksFreeTextForAType,
    AsksTheAgentsOwnType,
    Elsewhere,
)

ANSWER = '{"refund": true, "priority": "high"}'
OWN = [AsksTheAgentsOwnType, AsksForAnotherType, AsksByNameForAnotherType]
CALLER_TIMEOUT = timedelta(seconds=60)
STARTED = EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED


async def children_started(temporal: Client, workflow_id: str) -> int:
    history = await temporal.get_workflow_handle(workflow_id).fetch_history()
    return sum(1 for event in history.events if event.event_type == STARTED)


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


async def test_the_sandboxs_own_copy_of_the_answer_model_is_the_agents_type(own_clock):
    """The caller's module imports Assessment as workflow code: another class object than
    the worker's agent declares, the same model; neither call is refused."""
    model = ScriptedModel([say('{"risky": false, "score": 3}')])
    own = [AsksWithItsOwnCopyOfTheType]
    async with AgentTestbed(assess, model=model, env=own_clock, workflows=own) as bed:
        said = await bed.temporal.execute_workflow(
            AsksWithItsOwnCopyOfTheType.run,
            "A new vendor",
            id="own-copy",
            task_queue=bed.task_queue,
            execution_timeout=CALLER_TIMEOUT,
        )
    assert said == ["True", "Assessment", "3", "3"]


async def test_an_agent_on_another_task_queue_is_refused_before_its_run_starts(own_clock):
    """Another worker serves triage on its own queue: a run this workflow started there
    would be refused at its first model call (its caller is not of that queue), so
    run_agent refuses the call at once, with or without output_type, starting nothing."""
    here_model, there_model = ScriptedModel([]), ScriptedModel([say(ANSWER)])
    own = [AsksAnotherQueue]
    async with (
        AgentTestbed(triage, model=there_model, env=own_clock) as there,
        AgentTestbed(triage, model=here_model, env=own_clock, workflows=own) as here,
    ):
        said = await here.temporal.execute_workflow(
            AsksAnotherQueue.run,
            Elsewhere(goal="Charged twice", task_queue=there.task_queue),
            id="other-queue",
            task_queue=here.task_queue,
            execution_timeout=CALLER_TIMEOUT,
        )
        started = await children_started(here.temporal, "other-queue")
    refusal = (
        f"refused: task_queue {there.task_queue!r} is not this workflow's "
        f"({here.task_queue!r}): an agent's worker refuses a run started from another "
        "task queue; run this workflow on the agent's task queue"
    )
    assert said == [refusal, refusal]
    assert started == 0 and here_model.requests == there_model.requests == []


async def test_an_agent_of_free_text_asked_for_a_model_is_refused_before_it_runs(own_clock):
    model = ScriptedModel([say("Noted.")])
    own = [AsksFreeTextForAType]
    async with AgentTestbed(notes, model=model, env=own_clock, workflows=own) as bed:
        said = await bed.temporal.execute_workflow(
            AsksFreeTextForAType.run,
            "Write it down",
            id="free-text-typed",
            task_queue=bed.task_queue,
            execution_timeout=CALLER_TIMEOUT,
        )
        started = await children_started(bed.temporal, "free-text-typed")
    refusal = (
        "refused: agent 'notes' declares no output_type, and the call asks for Verdict: "
        "declare it (Agent(output_type=Verdict)) or leave output_type out"
    )
    assert said == [refusal, refusal]
    assert started == 0 and model.requests == []
