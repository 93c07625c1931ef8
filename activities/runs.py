"""Other runs, asked from an activity. `await_run`: a parent reset to before its sub-agent's
start finds the child already there; it waits for that child's answer here instead of
starting a second one. `fork_origin`: a fork asks its parent who it is, so a fork's
carried state cannot name another run's identity or policy. `run_origin`: how a run came
about, as Temporal's own record has it (the admission, workflows/admission.py)."""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import ContinueAsNewInitiator, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowHistoryEventFilterType,
)
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.heartbeat import heartbeating
from durable_agents.workflows.activity_io import OtherRun, ParentFacts, RunOrigin, ScheduledRun
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


# Resets of resets followed back to the run a continue-as-new named (more is refused).
MAX_RESETS = 50
RESET = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW
INITIATORS = {
    ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_WORKFLOW: "continue_as_new",
    ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_RETRY: "retry",
    ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_CRON_SCHEDULE: "cron",
}


@activity.defn(name="run_origin")
async def run_origin(ignored: str = "") -> RunOrigin:
    """How the calling run came about, read from Temporal's record of it and of the runs
    it names (never from its input: the run asked about is the caller itself)."""
    info = activity.info()
    client = activity.client()
    own = client.get_workflow_handle(info.workflow_id or "", run_id=info.workflow_run_id)
    started = (await _first_event(own)).workflow_execution_started_event_attributes
    origin = RunOrigin(initiator="start")
    previous_run = started.continued_execution_run_id
    if previous_run:
        origin.initiator = INITIATORS.get(started.initiator, "unknown")
        previous = client.get_workflow_handle(info.workflow_id or "", run_id=previous_run)
        origin.previous = await _other_run(previous)
        if origin.previous.found:
            closed = await _close_event(previous)
            continued = closed.workflow_execution_continued_as_new_event_attributes
            origin.continued_into_this = (
                closed.HasField("workflow_execution_continued_as_new_event_attributes")
                and continued.new_execution_run_id
                in await _this_run_and_its_bases(client, own.id, info.workflow_run_id or "")
                and continued.input == started.input
            )
    if started.HasField("parent_workflow_execution"):
        parent = started.parent_workflow_execution
        handle = client.get_workflow_handle(parent.workflow_id, run_id=parent.run_id)
        origin.parent = await _other_run(handle)
    return origin


async def _this_run_and_its_bases(client: Client, workflow_id: str, run_id: str) -> set[str]:
    """This run's id and, where it is a reset of another (Temporal's reset, the Web UI's
    "reset to first workflow task"), the runs it was reset from, each named by the reset
    event in the history of the run after it: the continue-as-new names the first."""
    runs: set[str] = set()
    current: str | None = run_id
    while current and current not in runs and len(runs) < MAX_RESETS:
        runs.add(current)
        events = client.get_workflow_handle(workflow_id, run_id=current).fetch_history_events()
        current = None
        async for event in events:
            failed = event.workflow_task_failed_event_attributes
            if event.HasField("workflow_task_failed_event_attributes") and failed.cause == RESET:
                current = failed.base_run_id
                break
    return runs


async def _other_run(handle: WorkflowHandle[Any, Any]) -> OtherRun:
    try:
        described = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return OtherRun(found=False)
        raise
    return OtherRun(
        found=True,
        workflow_type=described.workflow_type,
        task_queue=described.task_queue,
        on_this_queue=described.task_queue == activity.info().task_queue,
    )


async def _first_event(handle: WorkflowHandle[Any, Any]) -> HistoryEvent:
    return await anext(aiter(handle.fetch_history_events(page_size=1)))


async def _close_event(handle: WorkflowHandle[Any, Any]) -> HistoryEvent:
    events = handle.fetch_history_events(
        event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT
    )
    closed = HistoryEvent()
    async for event in events:
        closed = event
    return closed
