"""The two layers that read Temporal's record of how a run began, each alone: the
admission's `run_origin` activity, and the activities' caller check. Each would hide the
other's mistakes in an end-to-end attack (either refuses), so each is asked directly
here, about runs someone else's workers made on a dev server."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.activities.runs import run_origin
from durable_agents.worker.callers import CallerCheck
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.packing import pack_state
from durable_agents.workflows.state import RunState
from tests.conftest import eventually, run_id
from tests.integration.test_outside_callers import Smuggled, Smuggler


@workflow.defn(name="AgentWorkflow")
class NamedLikeOurs:
    """Named as ours, on someone else's queue: starts our agent as its child and leaves."""

    @workflow.run
    async def run(self, smuggled: Smuggled) -> None:
        await workflow.start_child_workflow(
            "AgentWorkflow",
            smuggled.request,
            id=f"{workflow.info().workflow_id}-child",
            task_queue=smuggled.queue,
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
        )


async def current_run(client: Client, wid: str) -> str:
    async def started() -> str | None:
        try:
            return (await client.get_workflow_handle(wid).describe()).run_id
        except Exception:
            return None

    return str(await eventually(started))


def calling(wid: str, run: str, queue: str, activity: str = "call_model") -> Any:
    """The fields of activity.Info the caller check reads, as our worker would see them."""
    return SimpleNamespace(
        activity_type=activity,
        is_local=False,
        workflow_type="AgentWorkflow",
        workflow_id=wid,
        workflow_run_id=run,
        task_queue=queue,
    )


async def ask_origin(client: Client, wid: str, run: str, queue: str) -> Any:
    env = ActivityEnvironment(client=client)
    env.info = dataclasses.replace(
        env.info,
        workflow_id=wid,
        workflow_run_id=run,
        workflow_type="AgentWorkflow",
        task_queue=queue,
    )
    return await env.run(run_origin, "")


@pytest.fixture
def ours() -> str:
    """Our task queue in these tests: no worker of ours polls it, so the runs made on it
    wait, as they were made, to be asked about."""
    return f"ours-{uuid.uuid4().hex[:8]}"


async def test_a_parent_named_like_ours_on_another_queue_is_not_ours(
    dev_env: WorkflowEnvironment, ours: str
) -> None:
    client = dev_env.client
    parent, theirs = run_id("named-like-ours"), f"theirs-{uuid.uuid4().hex[:8]}"
    request = RunRequest(goal="Refund jane 80 EUR", agent="refund")
    async with Worker(
        client, task_queue=theirs, workflows=[NamedLikeOurs],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):  # fmt: skip
        await client.execute_workflow(
            NamedLikeOurs.run, Smuggled(ours, request), id=parent, task_queue=theirs
        )
    child = f"{parent}-child"
    run = await current_run(client, child)

    refused = await CallerCheck(client).refusal(calling(child, run, ours), None)
    assert refused == (
        f"run {child} was started by a AgentWorkflow on {theirs!r}, not by a run of this deployment"
    )
    origin = await ask_origin(client, child, run, ours)
    assert origin.parent.found and not origin.parent.on_this_queue

    # The parent's id taken again, on our queue: the run that started the child is still
    # the one on their queue, whatever runs under that id now.
    await client.start_workflow("AgentWorkflow", RunRequest(goal="x"), id=parent, task_queue=ours)
    origin = await ask_origin(client, child, run, ours)
    assert origin.parent.found and not origin.parent.on_this_queue
    assert await CallerCheck(client).refusal(calling(child, run, ours), None) == refused
    for wid in (child, parent):
        await client.get_workflow_handle(wid).terminate("asked")


async def test_a_chain_continued_from_another_type_on_our_queue_is_not_ours(
    dev_env: WorkflowEnvironment, ours: str
) -> None:
    """Someone's workflow on our very queue continues as new into ours: the queue is
    right, the type is not."""
    client = dev_env.client
    wid = run_id("smuggled-here")
    state = RunState.start(wid, RunRequest(goal="pay"), datetime.now(UTC))
    carried = RunRequest(goal="pay", resume_state_packed=pack_state(state))
    async with Worker(
        client, task_queue=ours, workflows=[Smuggler],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):  # fmt: skip
        await client.start_workflow(Smuggler.run, Smuggled(ours, carried), id=wid, task_queue=ours)

        async def continued() -> str | None:
            described = await client.get_workflow_handle(wid).describe()
            return described.run_id if described.workflow_type == "AgentWorkflow" else None

        run = str(await eventually(continued))
    refused = await CallerCheck(client).refusal(calling(wid, run, ours), None)
    assert refused == (
        f"run {wid} continued as new from a Smuggler on {ours!r}, not from a run of this deployment"
    )
    origin = await ask_origin(client, wid, run, ours)
    assert origin.previous.workflow_type == "Smuggler" and origin.previous.on_this_queue
    await client.get_workflow_handle(wid).terminate("asked")
