"""`await_run`: wait for another run's result from an activity. A parent reset to before
its sub-agent's start finds the child already there; it waits for that child's answer
here instead of starting a second one."""

from __future__ import annotations

from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError, CancelledError

from activities.heartbeat import heartbeating
from workflows.contracts import RunResult, preview


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
