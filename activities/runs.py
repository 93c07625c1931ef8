"""Other runs, asked from an activity. `await_run`: a parent reset to before its sub-agent's
start finds the child already there; it waits for that child's answer here instead of
starting a second one. `fork_origin`: a fork asks its parent who it is, so a fork's
carried state cannot name another run's identity or policy."""

from __future__ import annotations

from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.heartbeat import heartbeating
from durable_agents.workflows.activity_io import ParentFacts, ScheduledRun
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import RunResult
from durable_agents.workflows.state import RunState


@activity.defn(name="await_run")
async def await_run(run_id: str) -> RunResult:
    handle = activity.client().get_workflow_handle(run_id, result_type=RunResult)
    async with heartbeating():
        try:
            result: RunResult = await handle.result()
        except WorkflowFailureError as err:
            if isinstance(err.cause, CancelledError):
                return RunResult(run_id=run_id, status="cancelled")
            why = getattr(err.cause, "message", None) or str(err.cause)
            raise ApplicationError(
                f"run {run_id} failed: {preview(why, 300)}", non_retryable=True
            ) from err
    return result


@activity.defn(name="fork_origin")
async def fork_origin(parent_run_id: str) -> ParentFacts:
    """The parent's identity and policy, from the parent's own workflow code (a query)."""
    handle = activity.client().get_workflow_handle(parent_run_id)
    try:
        described = await handle.describe()
        ours = (described.workflow_type, described.task_queue)
        if ours != ("AgentWorkflow", activity.info().task_queue):
            raise ApplicationError(
                f"the fork's parent {parent_run_id} is a {ours[0]} on {ours[1]!r}, not a run "
                "of this deployment",
                non_retryable=True,
            )
        state = await handle.query("state", result_type=RunState)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise ApplicationError(
                f"the fork's parent {parent_run_id} does not exist", non_retryable=True
            ) from err
        raise
    return ParentFacts(
        store_key=state.store_key,
        policy=state.policy,
        memory_namespace=state.memory_namespace,
        subject=state.subject,
    )


@activity.defn(name="scheduled_run")
async def scheduled_run(run: ScheduledRun) -> bool:
    """Whether the Schedule started this very run (its workflow id and first run id), as
    the Schedule itself records it; retried while the Schedule has not recorded it yet."""
    handle = activity.client().get_schedule_handle(run.schedule_id)
    try:
        described = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    started = [*described.info.running_actions, *(a.action for a in described.info.recent_actions)]
    if any(
        getattr(action, "workflow_id", None) == run.workflow_id
        and getattr(action, "first_execution_run_id", None) == run.first_run_id
        for action in started
    ):
        return True
    raise ApplicationError(f"schedule {run.schedule_id} has not recorded run {run.workflow_id}")
