"""A chain is read as far back as Temporal keeps it, and no further: a run Temporal no
longer shows ends the walk (its retention removed the oldest), any other error reading an
earlier run is the caller's to word, never a shorter chain read as whole."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.runtime.chains import chain_starts
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.packing import pack_state
from durable_agents.workflows.state import RunState
from tests.conftest import eventually, run_id
from tests.integration.test_outside_callers import Smuggled, Smuggler


async def two_run_chain(env: WorkflowEnvironment) -> tuple[str, str]:
    """A chain of two runs (someone's workflow continued as new into ours, on a queue no
    worker of ours serves): its id and its first run."""
    client, wid, queue = env.client, run_id("chain"), f"chain-{uuid.uuid4().hex[:8]}"
    state = RunState.start(wid, RunRequest(goal="g"), datetime.now(UTC))
    carried = RunRequest(goal="g", resume_state_packed=pack_state(state))
    async with Worker(
        client, task_queue=queue, workflows=[Smuggler],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):  # fmt: skip
        first = await client.start_workflow(
            Smuggler.run, Smuggled(queue, carried), id=wid, task_queue=queue
        )

        async def continued() -> bool:
            return (await client.get_workflow_handle(wid).describe()).run_id != first.result_run_id

        await eventually(continued)
    return wid, str(first.result_run_id)


async def test_an_earlier_run_that_cannot_be_read_is_an_error_not_a_shorter_chain(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    wid, first = await two_run_chain(dev_env)
    [(oldest, _), _] = await chain_starts(dev_env.client, wid)
    assert oldest == first
    reading = WorkflowHandle.fetch_history_events

    def unavailable(handle: WorkflowHandle[Any, Any], **options: Any) -> Any:
        if handle.run_id == first:  # Temporal failing to answer for the earlier run
            raise RPCError("unavailable", RPCStatusCode.UNAVAILABLE, b"")
        return reading(handle, **options)

    monkeypatch.setattr(WorkflowHandle, "fetch_history_events", unavailable)
    with pytest.raises(RPCError) as failed:
        await chain_starts(dev_env.client, wid)
    assert failed.value.status == RPCStatusCode.UNAVAILABLE
    await dev_env.client.get_workflow_handle(wid).terminate("read")
