"""Client-side verbs on runs. The CLI and the tests call these; no rule of a run lives here."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from worker.settings import Settings
from workflows import search_attributes as sa
from workflows.agent import AgentWorkflow
from workflows.contracts import RUN_ID_PATTERN, Decision, RunRequest, RunResult, preview
from workflows.state import RunState, RunStatus, RunSummary

WORKFLOW_TYPE = "AgentWorkflow"
T = TypeVar("T")


class RunError(Exception):
    """A verb on a run could not be carried out; the message says why in one line."""


@dataclass(frozen=True)
class StartedRun:
    run_id: str
    attached: bool  # True when the id was already running and we joined that run


def new_run_id() -> str:
    return f"run-{uuid.uuid4().hex[:12]}"


async def start_run(
    client: Client, settings: Settings, request: RunRequest, run_id: str | None = None
) -> StartedRun:
    """Start a run, or attach to the one already running under that id (never a second)."""
    run_id = run_id or new_run_id()
    if not re.match(RUN_ID_PATTERN, run_id):
        raise RunError(f"bad run id {run_id!r}: use letters, digits and . _ : - (at most 200)")
    try:
        await client.start_workflow(
            AgentWorkflow.run,
            request,
            id=run_id,
            task_queue=settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            static_summary=preview(request.goal, 120),
            search_attributes=_initial_attributes(),
        )
        return StartedRun(run_id=run_id, attached=False)
    except WorkflowAlreadyStartedError:
        description = await client.get_workflow_handle(run_id).describe()
        if description.status == WorkflowExecutionStatus.RUNNING:
            return StartedRun(run_id=run_id, attached=True)
        status = description.status.name.lower() if description.status else "closed"
        raise RunError(
            f"run {run_id} already exists and is {status}; choose another --id"
        ) from None


def _initial_attributes() -> TypedSearchAttributes:
    """So a run is findable by status from its first moment, before a worker touches it."""
    return TypedSearchAttributes([SearchAttributePair(sa.STATUS, RunStatus.PLANNING.value)])


def handle(client: Client, run_id: str) -> WorkflowHandle[Any, Any]:
    return client.get_workflow_handle(run_id)


async def get_state(client: Client, run_id: str) -> RunState:
    return await _query(client, run_id, "state", RunState)


async def get_summary(client: Client, run_id: str) -> RunSummary:
    return await _query(client, run_id, "summary", RunSummary)


async def _query(client: Client, run_id: str, name: str, result_type: type[T]) -> T:
    try:
        result: T = await handle(client, run_id).query(name, result_type=result_type)
        return result
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunError(f"no run with id {run_id}") from None
        raise RunError(f"cannot read run {run_id}: {err.message}") from None


async def approve(client: Client, run_id: str, decision: Decision) -> None:
    await _signal(client, run_id, "approve", decision)


async def reject(client: Client, run_id: str, decision: Decision) -> None:
    await _signal(client, run_id, "reject", decision)


async def _signal(client: Client, run_id: str, name: str, decision: Decision) -> None:
    try:
        await handle(client, run_id).signal(name, decision)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunError(f"no running run with id {run_id}") from None
        raise RunError(f"cannot signal run {run_id}: {err.message}") from None


async def wait_result(client: Client, run_id: str) -> RunResult:
    result: RunResult = await client.get_workflow_handle(run_id, result_type=RunResult).result()
    return result


@dataclass(frozen=True)
class RunListing:
    run_id: str
    status: str
    step: int | None
    waiting_for: str
    temporal_status: str
    started_at: str


async def list_runs(
    client: Client, status: RunStatus | None = None, limit: int = 100
) -> list[RunListing]:
    query = f"WorkflowType = '{WORKFLOW_TYPE}'"
    if status is not None:
        query += f" AND {sa.STATUS.name} = '{status.value}'"
    listings: list[RunListing] = []
    async for execution in client.list_workflows(query, limit=limit):
        attributes = execution.typed_search_attributes
        listings.append(
            RunListing(
                run_id=execution.id,
                status=attributes.get(sa.STATUS) or "",
                step=attributes.get(sa.STEP),
                waiting_for=attributes.get(sa.WAITING_FOR) or "",
                temporal_status=execution.status.name.lower() if execution.status else "",
                started_at=execution.start_time.isoformat(timespec="seconds"),
            )
        )
    return listings


async def recorded_status(client: Client, run_id: str) -> str:
    """The status as the search attribute has it: readable with no worker running."""
    try:
        description = await handle(client, run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunError(f"no run with id {run_id}") from None
        raise
    status = description.typed_search_attributes.get(sa.STATUS)
    if status:
        return status
    return description.status.name.lower() if description.status else "unknown"


async def check_decision(client: Client, run_id: str, request_id: str | None) -> str | None:
    """Refuse a decision that cannot apply, when the run can say so (a worker answers).

    Returns a note when the run could not be asked: the signal is then sent anyway and
    Temporal keeps it until a worker acts on it.
    """
    try:
        summary = await handle(client, run_id).query(
            "summary", result_type=RunSummary, rpc_timeout=timedelta(seconds=3)
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunError(f"no run with id {run_id}") from None
        return "no worker answered; the decision is kept and applied when a worker runs"
    pending = summary.pending_approvals
    if not pending:
        raise RunError(f"run {run_id} has no pending approval (status {summary.status.value})")
    if request_id is None and len(pending) > 1:
        ids = ", ".join(p.request_id for p in pending)
        raise RunError(f"run {run_id} waits on several approvals; name one of: {ids}")
    if request_id is not None and request_id not in {p.request_id for p in pending}:
        ids = ", ".join(p.request_id for p in pending)
        raise RunError(f"run {run_id} has no pending request {request_id}; pending: {ids}")
    return None


async def wait_for_outcome(client: Client, run_id: str) -> dict[str, Any]:
    """Wait for the run to close; the outcome as JSON-ready fields, failed runs included."""
    from temporalio.client import WorkflowFailureError

    try:
        result = await wait_result(client, run_id)
        return result.model_dump(mode="json")
    except WorkflowFailureError as err:
        cause = err.cause
        message = getattr(cause, "message", None) or str(cause)
        return {"run_id": run_id, "status": RunStatus.FAILED.value, "error": message}
