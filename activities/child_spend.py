"""`child_spend`: what a running sub-agent has spent, asked of the sub-agent's own run.

A parent never takes the spend a report says (anyone who may signal it could send one):
the report only tells it when to ask here. The run asked must be the caller's sub-agent
by Temporal's own record (its parent, type and queue), and the spend is its own answer.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.workflows.contracts import Spend
from durable_agents.workflows.run_summary import RunSummary


@activity.defn(name="child_spend")
async def child_spend(child_id: str) -> Spend:
    """The calling run's sub-agent `child_id`'s spend so far (its `summary` query)."""
    info = activity.info()
    try:
        described = await activity.client().get_workflow_handle(child_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise ApplicationError(f"run {child_id} does not exist", non_retryable=True) from err
        raise
    ours = (described.workflow_type, described.task_queue, described.parent_id)
    if ours != (info.workflow_type, info.task_queue, info.workflow_id):
        raise ApplicationError(
            f"run {child_id} is no sub-agent of {info.workflow_id}: a {ours[0]} on "
            f"{ours[1]!r} started by {ours[2] or 'no workflow'}",
            non_retryable=True,
        )
    # The run described, not a later one that took the id since.
    run = activity.client().get_workflow_handle(child_id, run_id=described.run_id)
    summary: RunSummary = await run.query("summary", result_type=RunSummary)
    return summary.spent or Spend()
