"""An agent's declared budget and limits are floors (workflows/floors.py): a start may
only tighten them. The table covers every field of RunLimits; a start through a plain
Temporal client asking more than the agent declares is refused in one line."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowFailureError

from durable_agents import Agent
from durable_agents.control import runs
from durable_agents.testing import AgentTestbed, ScriptedModel, say
from durable_agents.workflows.contract_base import BudgetLimits
from durable_agents.workflows.contracts import RunBudget, RunLimits, RunRequest
from durable_agents.workflows.floors import (
    LIMIT_FLOORS,
    FloorLoosened,
    budget_within,
    limits_within,
    tighter_budget,
)
from tests.conftest import eventually, run_id

DECLARED = RunBudget(usd=0.5, tool_calls=10)


def test_every_limit_has_a_floor_rule() -> None:
    assert set(LIMIT_FLOORS) == set(RunLimits.model_fields)


@pytest.mark.parametrize("name", sorted(BudgetLimits.model_fields))
def test_a_budget_figure_above_the_agents_is_refused(name: str) -> None:
    declared = RunBudget(**{name: 100})
    with pytest.raises(FloorLoosened, match=f"{name} must be 100"):
        budget_within(RunBudget(**{name: 101}), declared)  # no tolerance, however small
    assert budget_within(RunBudget(**{name: 100}), declared) == declared
    assert budget_within(RunBudget(**{name: 4}), declared) == RunBudget(**{name: 4})


def test_a_budget_left_out_is_the_agents() -> None:
    assert budget_within(None, DECLARED) == DECLARED
    assert budget_within(RunBudget(), DECLARED) == DECLARED  # "none" is not "no limit"
    assert budget_within(RunBudget(tokens=7), DECLARED) == RunBudget(
        usd=0.5, tool_calls=10, tokens=7
    )


@pytest.mark.parametrize("name", sorted(n for n, rule in LIMIT_FLOORS.items() if rule == "lower"))
def test_a_guard_above_the_agents_is_refused(name: str) -> None:
    declared = RunLimits(**{name: 2})
    with pytest.raises(FloorLoosened, match=f"{name} must be 2"):
        limits_within(RunLimits(**{name: 3}), declared)
    assert getattr(limits_within(RunLimits(**{name: 1}), declared), name) == 1
    # A figure the request did not set (its default) is not an ask.
    assert getattr(limits_within(RunLimits(context="step"), declared), name) == 2


def test_a_sub_agent_takes_the_tighter_of_its_parents_and_its_own() -> None:
    handed = RunBudget(usd=3.0, tokens=100)
    assert tighter_budget(handed, DECLARED) == RunBudget(usd=0.5, tokens=100, tool_calls=10)
    assert tighter_budget(None, DECLARED) == DECLARED


@pytest.mark.usefixtures("worker")
async def test_a_start_above_the_agents_budget_is_refused_and_none_takes_the_agents(
    dev_env, settings
) -> None:
    """The triage agent declares $0.50: a start asking $1,000,000 is refused before any
    activity; one with an empty budget runs under the agent's."""
    client = dev_env.client
    greedy = RunRequest(goal="Ticket 12", agent="triage", budget=RunBudget(usd=1_000_000))
    rid = run_id("greedy")
    await client.start_workflow("AgentWorkflow", greedy, id=rid, task_queue=settings.task_queue)
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(client.get_workflow_handle(rid).result(), 60)
    said = str(getattr(failed.value.cause, "message", failed.value.cause))
    assert said == "refused: the requested budget loosens the agent's: usd must be 0.5 or less"
    history = await client.get_workflow_handle(rid).fetch_history()
    assert not any(e.HasField("activity_task_scheduled_event_attributes") for e in history.events)

    empty = RunRequest(goal="Ticket 12", agent="triage", budget=RunBudget())
    rid = run_id("empty")
    await runs.start_run(client, settings, empty, rid)

    async def adopted():  # the agent's record is taken in the run's first task
        state = await runs.get_state(client, rid)
        return state if state.agent is not None else None

    state = await eventually(adopted)
    assert state.budget is not None and state.budget.usd == 0.5
    await runs.wait_for_outcome(client, rid)  # nothing left running on the shared server


# The guards a request may only lower, as the product states them (docs/architecture.md,
# "Admission"): written here, not read from LIMIT_FLOORS, so loosening the table fails.
GUARDS = {
    "max_turns_per_step",
    "max_plan_attempts",
    "model_timeout_seconds",
    "model_max_attempts",
    "tool_timeout_seconds",
}


def test_the_guards_are_floors() -> None:
    assert {name for name, rule in LIMIT_FLOORS.items() if rule == "lower"} == GUARDS


async def test_a_start_asking_looser_limits_alone_is_refused(time_env) -> None:
    """An agent that declares two turns a step, started (through a plain client) with
    limits only and five turns: refused in one line before any activity."""
    careful = Agent(
        name="careful",
        instructions="Answer.",
        tools=[],
        planning=False,
        limits=RunLimits(max_turns_per_step=2),
    )
    async with AgentTestbed(careful, model=ScriptedModel([say("Done.")]), env=time_env) as bed:
        client = bed.client.temporal
        request = RunRequest(goal="g", agent="careful", limits=RunLimits(max_turns_per_step=5))
        rid = run_id("loose-limits")
        await client.start_workflow(
            "AgentWorkflow", request, id=rid, task_queue=bed.settings.task_queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await client.get_workflow_handle(rid).result()
        history = await client.get_workflow_handle(rid).fetch_history()
    said = str(getattr(failed.value.cause, "message", failed.value.cause))
    assert said == (
        "refused: the requested limits loosen the agent's: max_turns_per_step must be 2 or less"
    )
    assert not any(e.HasField("activity_task_scheduled_event_attributes") for e in history.events)
