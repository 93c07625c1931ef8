"""A cancel sent with the start (or while the run records its agent) cancels the run: it
was once recorded in the audit and then lost, the run going on to plan and wait."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from durable_agents import Agent, ToolRisk, tool
from durable_agents.activities import heartbeat
from durable_agents.activities.model_client import CallMeta, ModelReply, ModelRequest
from durable_agents.control import runs
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor
from durable_agents.workflows.records import RunStatus, workflow_id_of
from tests.conftest import eventually, run_id


@pytest.mark.usefixtures("ts_worker")
async def test_a_cancel_sent_with_the_start_cancels_the_run(time_env, ts_settings):
    client, rid = time_env.client, run_id("early")
    request = RunRequest(goal="pay", agent="invoice", label="pay-invoice")
    handle = await client.start_workflow(
        AgentWorkflow.run,
        request,
        id=rid,
        task_queue=ts_settings.task_queue,
        start_signal="cancel",
        start_signal_args=[Actor(by="ops", reason="wrong goal")],
    )
    result = await handle.result()
    state = await runs.get_state(client, rid)
    assert result.status == RunStatus.CANCELLED
    assert state.usage.model_calls == 0 and not state.approvals
    assert [(e.actor, e.action) for e in state.audit][-2:] == [
        ("ops", "cancel_requested"),
        ("ops", "run_cancelled"),
    ]


@tool
def look_up(order_id: str) -> str:
    """Look an order up."""
    LOOKED_UP.append(order_id)
    return f"order {order_id}: open"


LOOKED_UP: list[str] = []
loop_agent = Agent(name="looks-up", instructions="Look orders up.", tools=[look_up], planning=False)


class CancelledWhileAnswering:
    """A model that is cancelled while it answers, and answers anyway: its activity sends
    no heartbeat before it returns, so the cancellation never reaches it."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.scripted = ScriptedModel([call("look_up", order_id="A-1"), say("Done.")])

    async def complete(self, request: ModelRequest, meta: CallMeta) -> ModelReply:
        workflow_id = workflow_id_of(meta.run_id)
        await runs.cancel(self.client, workflow_id, Actor(by="ops", reason="stop"))

        async def recorded() -> bool:
            state = await runs.get_state(self.client, workflow_id)
            return state.cancel_requested_by == "ops"

        await eventually(recorded)
        return await self.scripted.complete(request, meta)


async def test_a_cancel_during_an_activity_that_finishes_anyway_still_cancels(
    time_env, monkeypatch
):
    # No heartbeat during the test: the cancellation cannot reach the model's activity.
    # (The interval is read at each call: patching the decorated function's defaults, as
    # this test once did, changed nothing.)
    monkeypatch.setattr(heartbeat, "INTERVAL_SECONDS", 3600.0)
    LOOKED_UP.clear()
    model = CancelledWhileAnswering(time_env.client)
    async with AgentTestbed(loop_agent, model=model, env=time_env) as bed:
        run = await bed.start("looks-up", "Look up A-1")
        result = await run.result()
        state = await run.state()
    assert result.status == RunStatus.CANCELLED
    assert LOOKED_UP == [], "the tool the cancelled model asked for never ran"
    assert state.usage.model_calls == 1
    assert [(e.actor, e.action) for e in state.audit][-1] == ("ops", "run_cancelled")


async def test_a_cancel_sent_with_the_start_cancels_before_the_story_begins(time_env):
    """The cancel takes hold where the story would start (the first of the cancel-holds
    check's call sites): no step is opened, no goal goes to the model."""
    async with AgentTestbed(loop_agent, model=ScriptedModel([say("Done.")]), env=time_env) as bed:
        rid = run_id("early-loop")
        request = RunRequest(goal="Look up A-1", agent="looks-up", label="loop")
        handle = await bed.client.temporal.start_workflow(
            AgentWorkflow.run,
            request,
            id=rid,
            task_queue=bed.settings.task_queue,
            start_signal="cancel",
            start_signal_args=[Actor(by="ops", reason="wrong goal")],
        )
        result = await handle.result()
        state = await runs.get_state(bed.client.temporal, rid)
    assert result.status == RunStatus.CANCELLED
    assert state.plan == [] and state.current_step is None and not state.outbox
    assert [e.kind for e in state.events][-2:] == ["started", "cancelled"]


@tool(risk=ToolRisk.NEEDS_APPROVAL)
def wire(account: str) -> str:
    """Wire money to an account."""
    WIRED.append(account)
    return f"wired to {account}"


WIRED: list[str] = []
wire_agent = Agent(name="wires", instructions="Wire money.", tools=[wire], planning=False)


async def test_a_cancel_during_a_model_call_asks_no_person_for_what_it_asked(time_env, monkeypatch):
    """The cancelled model's answer calls a tool that needs approval: the run does not
    put the request before a person and wait for its deadline (the cancel-holds check in
    the wait for a person); the request is closed as cancelled."""
    monkeypatch.setattr(heartbeat, "INTERVAL_SECONDS", 3600.0)
    WIRED.clear()
    model = CancelledWhileAnswering(time_env.client)
    model.scripted = ScriptedModel([call("wire", account="NL-1"), say("Wired.")])
    async with AgentTestbed(wire_agent, model=model, env=time_env) as bed:
        run = await bed.start("wires", "Wire NL-1")
        result = await run.result()
        state = await run.state()
    assert result.status == RunStatus.CANCELLED and WIRED == []
    assert [(a.tool, a.decided_by) for a in state.approvals] == [("wire", "cancelled")]
    assert state.usage.model_calls == 1
    assert "deadline passed" not in [e.kind for e in state.events]
