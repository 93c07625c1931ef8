"""An agent defined outside the core (tests/agents/support_desk.py: its own tools, its own
billing service, only the public API) on the dev server: approvals, crashes at each
instant of its refund, a worker that lacks it, and its tool list changing mid-run."""

from __future__ import annotations

import asyncio
import signal

import pytest

from durable_agents.control import runs
from durable_agents.infra.stack import worker_polling
from durable_agents.worker.main import build_worker
from durable_agents.workflows.agents import Agent
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from durable_agents.workflows.registry import AgentRegistry, load_registry
from durable_agents.workflows.tools import ToolRisk, tool
from tests.agents import support_desk
from tests.agents.support_desk import look_up_order, refund_order, refunds
from tests.conftest import (
    eventually,
    finish_on_a_new_worker,
    run_id,
    spawn_worker,
    wait_for_approval,
    wedged_with,
)

SUPPORT = "tests.agents.support_desk"
REQUEST = RunRequest(goal="Refund order A-1001", agent="support-desk", label="support-refund")


@pytest.mark.parametrize(
    ("instant", "billing_replays"),
    [
        ("before_provider", 0),  # the billing service never heard of it: the retry refunds
        ("after_provider", 1),  # refunded, not recorded: the service answers the replay
        ("after_ledger", 0),  # recorded, Temporal not told: the ledger answers
    ],
)
async def test_a_crash_at_each_instant_of_its_own_tool_refunds_once(
    dev_env, settings, tmp_path, instant, billing_replays
):
    client, rid = dev_env.client, run_id(f"own-{instant.replace('_', '-')}")
    doomed = spawn_worker(
        settings,
        tmp_path / "w1.log",
        AGENT_MODULES=SUPPORT,
        AGENT_CRASH_AT=f"{instant}:refund_order",
    )
    try:
        await eventually(lambda: worker_polling(settings), within=30)
        await runs.start_run(client, settings, REQUEST, rid)
        pending = await wait_for_approval(client, rid)
        # The tool's default approvers hold: nobody else may decide.
        assert pending.pending_approvals[0].tool == "refund_order"
        await runs.approve(client, rid, Decision(by="intern"))  # refused, dropped
        await runs.approve(client, rid, Decision(by="support-lead"))
        code = await asyncio.to_thread(doomed.wait, 60)
    finally:
        if doomed.poll() is None:
            doomed.kill()
    assert code == -signal.SIGKILL, "the fault hook must have killed the worker"

    result, store_key = await finish_on_a_new_worker(
        settings, client, rid, tmp_path / "w2.log", AGENT_MODULES=SUPPORT
    )

    assert result.status == "completed"
    assert result.final_answer == "(scripted) Order A-1001 is refunded: 20.00 EUR."
    [refund] = refunds(settings.data_dir, rid)
    assert refund["key"] == f"{store_key}/step-1/call_loop_t1_0"
    assert refund["replays"] == billing_replays
    assert result.effects is not None
    assert [e.tool for e in result.effects.recent] == ["refund_order"]


async def test_a_worker_without_the_agent_leaves_the_run_open_and_retried(dev_env, settings):
    client, rid = dev_env.client, run_id("no-agent")
    examples_only = load_registry(["durable_agents.examples.invoice"])
    async with build_worker(client, settings, registry=examples_only):
        await runs.start_run(client, settings, REQUEST, rid)
        failure = await wedged_with(client, settings.task_queue, rid)
    assert "no agent named 'support-desk' here" in failure
    assert (await client.get_workflow_handle(rid).describe()).status.name == "RUNNING"

    async with build_worker(client, settings, registry=load_registry([SUPPORT])):

        async def recovered() -> bool:  # its next workflow task went through
            described = await client.get_workflow_handle(rid).describe()
            return bool(described.raw_description.pending_workflow_task.attempt < 2)

        await eventually(recovered, within=60)
        await wait_for_approval(client, rid)
        await runs.approve(client, rid, Decision(by="support-lead"))
        result = await runs.wait_result(client, rid)
    assert result.status == "completed"
    assert len(refunds(settings.data_dir, rid)) == 1


@tool(risk=ToolRisk.SIDE_EFFECT)
def close_ticket(order_id: str) -> dict[str, str]:
    """Close the customer's ticket."""
    return {"closed": order_id}


async def test_a_run_keeps_the_tools_it_started_with(dev_env, settings):
    """The agent's tool list changes while a run waits: the run neither gains the new tool
    nor loses the one it recorded (still defined in the module). A worker where that tool
    is gone altogether fails the workflow task, and the run waits for one that has it."""
    client, rid = dev_env.client, run_id("tools-change")
    async with build_worker(client, settings, registry=load_registry([SUPPORT])):
        await runs.start_run(client, settings, REQUEST, rid)
        await wait_for_approval(client, rid)
        agent = (await runs.get_state(client, rid)).agent
    assert agent is not None
    recorded = [t.name for t in agent.tools]
    assert recorded == ["look_up_order", "refund_order"]

    # Version 2 of the module: refund_order is no longer the agent's, close_ticket is.
    changed = Agent(
        name="support-desk",
        instructions=support_desk.support_desk.instructions,
        tools=[look_up_order, close_ticket],
        planning=False,
    )
    without_refund = AgentRegistry().add(changed)
    async with build_worker(client, settings, registry=without_refund):
        await runs.approve(client, rid, Decision(by="support-lead"))
        failure = await wedged_with(client, settings.task_queue, rid)
    assert "has no tool 'refund_order'" in failure

    async with build_worker(client, settings, registry=AgentRegistry().add(changed, refund_order)):
        result = await runs.wait_result(client, rid)
        state = await runs.get_state(client, rid)
    assert result.status == "completed"
    assert state.agent is not None
    assert [t.name for t in state.agent.tools] == recorded  # close_ticket never offered
    assert len(refunds(settings.data_dir, rid)) == 1
