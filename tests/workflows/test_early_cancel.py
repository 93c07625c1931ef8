"""A cancel sent with the start (or while the run records its agent) cancels the run: it
was once recorded in the audit and then lost, the run going on to plan and wait."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from activities import heartbeat
from activities.model_client import CallMeta, ModelReply, ModelRequest
from durable_agents import Agent, tool
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from starters import runs
from tests.conftest import eventually, run_id
from workflows.agent import AgentWorkflow
from workflows.contracts import Actor, RunRequest
from workflows.state import RunStatus, workflow_id_of


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
