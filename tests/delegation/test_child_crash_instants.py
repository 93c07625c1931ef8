"""The worker dies at each instant around a sub-agent's start, provoked by a fault hook in
workflow code rather than by luck; another worker finishes: one child run, one note."""

from __future__ import annotations

import asyncio
import json
import signal
from datetime import timedelta

import pytest

from durable_agents.control import runs
from durable_agents.infra.stack import worker_polling
from durable_agents.worker.main import build_worker
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RunRequest
from tests.conftest import eventually, finish_on_a_new_worker, run_id, spawn_worker


async def executions_of(client, workflow_id: str) -> int:
    return len([w async for w in client.list_workflows(f'WorkflowId = "{workflow_id}"')])


@pytest.mark.parametrize(
    "instant", ["before_child_start", "after_child_start", "after_child_answer"]
)
async def test_a_crash_around_the_childs_start_leaves_one_child(
    dev_env, settings, tmp_path, instant
):
    client, rid = dev_env.client, run_id(instant.replace("_", "-"))
    kb = tmp_path / "kb"
    doomed = spawn_worker(settings, tmp_path / "w1.log", AGENT_CRASH_AT=instant, KB_DIR=str(kb))
    try:
        await eventually(lambda: worker_polling(settings), within=30)
        request = RunRequest(goal="Ticket: late parcel", agent="triage", label="triage")
        # A workflow task the killed worker held is retried after its timeout: 2 s here
        # instead of Temporal's 10 s default, so the test waits less, not differently.
        await client.start_workflow(
            AgentWorkflow.run,
            request,
            id=rid,
            task_queue=settings.task_queue,
            task_timeout=timedelta(seconds=2),
        )
        code = await asyncio.to_thread(doomed.wait, 60)
    finally:
        if doomed.poll() is None:
            doomed.kill()
    assert code == -signal.SIGKILL, "the fault hook must have killed the worker"

    result, _ = await finish_on_a_new_worker(
        settings, client, rid, tmp_path / "w2.log", KB_DIR=str(kb)
    )

    async with build_worker(client, settings):  # answers the query; the run is over
        state = await runs.get_state(client, rid)
    assert result.status == "completed", result
    [delegation] = state.delegations
    assert delegation.status == "completed"
    assert await eventually(lambda: _one(client, delegation.child_id), within=10)
    assert len(json.loads((kb / "notes.json").read_text())["keys"]) == 1


async def _one(client, child_id: str) -> bool:
    return await executions_of(client, child_id) == 1
