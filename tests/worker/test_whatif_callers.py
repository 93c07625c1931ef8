"""A what-if worker's caller check walks a shadow's sub-agent tree up to its root and
admits only a root the what-if started: a tree whose root Temporal no longer shows cannot
be walked, so it is refused, never taken as the what-if's. Asked directly, about runs made
on a dev server."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio import workflow
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.worker.callers import CallerCheck
from tests.conftest import eventually, run_id
from tests.integration.test_admission import delete, gone
from tests.worker.test_origin_and_callers import calling, current_run


@workflow.defn(name="AgentWorkflow")
class Nesting:
    """Named as ours, on our queue: starts itself as its child `depth` deep, and leaves."""

    @workflow.run
    async def run(self, depth: int) -> None:
        if depth:
            await workflow.start_child_workflow(
                "AgentWorkflow",
                depth - 1,
                id=f"{workflow.info().workflow_id}-child",
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                execution_timeout=timedelta(minutes=5),
            )


async def test_a_tree_whose_root_temporal_no_longer_shows_is_not_the_whatifs(
    dev_env: WorkflowEnvironment,
) -> None:
    """A grandchild's parent is on our queue (the parent check passes): only the walk to
    the root, which was deleted, can refuse it."""
    client, ours = dev_env.client, f"ours-{uuid.uuid4().hex[:8]}"
    root = run_id("whatif-root")
    child, grandchild = f"{root}-child", f"{root}-child-child"
    async with Worker(
        client, task_queue=ours, workflows=[Nesting], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        await client.execute_workflow(Nesting.run, 2, id=root, task_queue=ours)

        async def grandchild_done() -> bool:
            handle = client.get_workflow_handle(grandchild)
            try:
                return (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
            except Exception:
                return False

        await eventually(grandchild_done)
    root_run = await current_run(client, root)
    runs = {wid: await current_run(client, wid) for wid in (child, grandchild)}
    asked: list[tuple[str, str]] = []

    async def the_root_only(wid: str, run: str) -> bool:
        asked.append((wid, run))
        return (wid, run) == (root, root_run)

    async def nothing(wid: str, run: str) -> bool:
        return False

    # The tree walks up to its root: admitted by a what-if that started the root.
    shown = CallerCheck(client, admits=the_root_only)
    assert await shown.refusal(calling(grandchild, runs[grandchild], ours), None) is None
    assert asked == [(root, root_run)]

    await delete(client, root)
    await eventually(lambda: gone(client, root))
    refused = CallerCheck(client, admits=nothing)
    said = await refused.refusal(calling(grandchild, runs[grandchild], ours), None)
    assert said == f"run {grandchild} was not started by this what-if"
    # The root's own child is refused earlier: its parent cannot be shown.
    said = await refused.refusal(calling(child, runs[child], ours), None)
    assert said is not None and f"was started by {root}, which Temporal no longer shows" in said
