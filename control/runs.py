"""Client-side verbs on runs. The CLI and the tests call these; no rule of a run lives here."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio.api.enums.v1 import PendingActivityState, TaskQueueType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.converter import DataConverter
from temporalio.exceptions import CancelledError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.store_queue import STORE_QUEUE_SEPARATOR
from durable_agents.control.signer import Signer, settings_signer
from durable_agents.runtime.client import POLLER_SEEN_SECONDS
from durable_agents.runtime.settings import Settings
from durable_agents.workflows import search_attributes as sa
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contract_base import RUN_ID_PATTERN, preview
from durable_agents.workflows.contracts import RunBudget, RunRequest, RunResult
from durable_agents.workflows.people_inputs import (
    Actor,
    Answer,
    BudgetRaise,
    DecideRequest,
    Decision,
    RewindRequest,
    StatePatch,
)
from durable_agents.workflows.records import (
    IDENTITY_SEPARATOR,
    ApprovalRequest,
    Question,
    RunEvent,
    RunStatus,
)
from durable_agents.workflows.run_summary import EventPage, RunSummary
from durable_agents.workflows.start_options import StartOptions
from durable_agents.workflows.state import RunState

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


def check_run_id(run_id: str) -> str:
    """A run id as people and scripts may write it, or RunError before anything is sent."""
    if not re.fullmatch(RUN_ID_PATTERN, run_id):
        raise RunError(f"bad run id {run_id!r}: use letters, digits and . _ : - (at most 200)")
    return run_id


async def start_run(
    client: Client,
    settings: Settings,
    request: RunRequest,
    run_id: str | None = None,
    memo: dict[str, Any] | None = None,
) -> StartedRun:
    """Start a run, or attach to the one already running under that id (never a second),
    when it was started with the same request; another request under a running id is
    refused rather than silently joined."""
    run_id = check_run_id(new_run_id() if run_id is None else run_id)
    request = with_subject_grant(settings, request, run_id)
    try:
        await client.start_workflow(
            AgentWorkflow.run,
            request,
            id=run_id,
            task_queue=settings.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            static_summary=preview(request.goal, 120),
            memo=memo,
            search_attributes=_initial_attributes(),
        )
        return StartedRun(run_id=run_id, attached=False)
    except WorkflowAlreadyStartedError:
        description = await client.get_workflow_handle(run_id).describe()
        if description.status == WorkflowExecutionStatus.RUNNING:
            first = description.raw_description.workflow_execution_info.first_run_id
            if await _started_with(client, run_id, first) != _what_it_asks(request):
                raise RunError(
                    f"run {run_id} is already running with another request (agent, goal, "
                    f"{', '.join(StartOptions.model_fields)}); choose another --id, or repeat "
                    "the same request to attach to it"
                ) from None
            return StartedRun(run_id=run_id, attached=True)
        status = description.status.name.lower() if description.status else "closed"
        raise RunError(
            f"run {run_id} already exists and is {status}; choose another --id"
        ) from None


def with_subject_grant(settings: Settings, request: RunRequest, run: str) -> RunRequest:
    """The request, its subject granted for `run` by the starter's own key when they have
    one (AGENT_SIGNING_KEY_FILE): a deployment with AGENT_SUBJECT_KEYS counts a run's
    subject only so (workflows/subject_grants.py)."""
    if not request.subject or request.subject_grant is not None:
        return request
    try:
        signer = settings_signer(settings, "starter")
    except ValueError as err:
        raise RunError(str(err)) from None
    if signer is None:
        return request
    return request.model_copy(update={"subject_grant": signer.subject_grant(run, request.subject)})


def _what_it_asks(request: RunRequest) -> tuple[Any, ...]:
    """What makes two start requests the same run: continue-as-new carries these along
    (its agent, goal, whether a conversation, and every start option)."""
    options = StartOptions.fields_of(request).values()
    return (request.agent, request.goal, request.conversation, *options)


async def _started_with(client: Client, run_id: str, first: str) -> tuple[Any, ...] | None:
    """What a run was started with: the first event's input of the first execution of its
    chain (`first`), since a continue-as-new starts the next one with the options as the
    run settled them (a policy left out is then the default policy, given). Where that
    execution's history is gone (past the namespace's retention), the running one's."""
    for execution in [first, None] if first else [None]:
        handle = client.get_workflow_handle(run_id, run_id=execution)
        try:
            async for event in handle.fetch_history_events(page_size=1):
                request = await started_request(client.data_converter, event)
                return _what_it_asks(request) if request is not None else None
        except RPCError as err:
            if err.status is not RPCStatusCode.NOT_FOUND:
                raise RunError(f"cannot read how run {run_id} was started: {err.message}") from None
    return None


async def started_request(converter: DataConverter, first_event: HistoryEvent) -> RunRequest | None:
    """The request an agent run's first event carries, read with the client's converter
    (None if it is not one we can read)."""
    started = first_event.workflow_execution_started_event_attributes
    try:
        [request] = await converter.decode(started.input.payloads, [RunRequest])
    except Exception:
        return None
    return request if isinstance(request, RunRequest) else None


def _initial_attributes() -> TypedSearchAttributes:
    """So a run is findable by status from its first moment, before a worker touches it."""
    return TypedSearchAttributes([SearchAttributePair(sa.STATUS, RunStatus.PLANNING.value)])


def handle(client: Client, run_id: str) -> WorkflowHandle[Any, Any]:
    return client.get_workflow_handle(run_id)


async def get_state(client: Client, run_id: str) -> RunState:
    return await _query(client, run_id, "state", RunState)


async def get_summary(client: Client, run_id: str) -> RunSummary:
    return await _query(client, run_id, "summary", RunSummary)


# A query to a wedged run is answered only when Temporal gives up on it (30 s): after this
# long without an answer, the run's pending workflow task says whether it is wedged.
WEDGE_CHECK_AFTER_SECONDS = 2.0


async def query(client: Client, run_id: str, name: str, result_type: type[T]) -> T:
    """A query's answer, or RunError saying in one line why there is none."""
    return await _query(client, run_id, name, result_type)


async def _query(client: Client, run_id: str, name: str, result_type: type[T]) -> T:
    asking = asyncio.ensure_future(handle(client, run_id).query(name, result_type=result_type))
    asking.add_done_callback(lambda task: task.cancelled() or task.exception())
    try:
        done, _ = await asyncio.wait({asking}, timeout=WEDGE_CHECK_AFTER_SECONDS)
        if not done and await _failing_again(client, run_id):
            raise wedged(run_id)
        result: T = await asking
        return result
    except WorkflowQueryFailedError as err:
        raise RunError(f"run {run_id} could not answer: {one_line_of(err.message)}") from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunError(f"no run with id {run_id}") from None
        if WEDGED in err.message:
            raise wedged(run_id) from None
        raise RunError(f"cannot read run {run_id}: {err.message}") from None
    finally:
        asking.cancel()


async def _failing_again(client: Client, run_id: str) -> bool:
    """The run's workflow task has failed and is being tried again (and again)."""
    try:
        described = await handle(client, run_id).describe()
    except RPCError:
        return False
    return described.raw_description.pending_workflow_task.attempt >= 2


# What Temporal says of a query or update to a run whose workflow task keeps failing.
WEDGED = "Workflow Task in failed state"


def wedged(run_id: str) -> RunError:
    return RunError(
        f"run {run_id} is wedged: its workflow task keeps failing, so it takes no action now; "
        "`agentctl doctor` says why and how to fix it"
    )


def one_line_of(text: str) -> str:
    return preview(text, 300)


async def approve(client: Client, run_id: str, decision: Decision) -> None:
    await _signal(client, run_id, "approve", decision)


async def reject(client: Client, run_id: str, decision: Decision) -> None:
    await _signal(client, run_id, "reject", decision)


async def signal(client: Client, run_id: str, name: str, payload: BaseModel) -> None:
    await _signal(client, run_id, name, payload)


async def _signal(client: Client, run_id: str, name: str, payload: BaseModel) -> None:
    try:
        await handle(client, run_id).signal(name, payload)
    except RPCError as err:
        raise await not_acting(client, run_id, err) from None


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
    # The workflow that started it as a child: a team's own (`run_agent`) or a delegating run.
    caller: str | None = None
    # What holds a running run up that no person can do anything about in the run
    # (`store_wait`: the replica holding its store is gone); "" when nothing.
    held_up: str = ""


async def list_runs(
    client: Client, status: RunStatus | None = None, limit: int = 100
) -> list[RunListing]:
    """Runs, newest first; a running one held up by a replica that is gone says so."""
    query = f"WorkflowType = '{WORKFLOW_TYPE}'"
    if status is not None:
        query += f" AND {sa.STATUS.name} = '{status.value}'"
    found = await listings(client, query, limit)
    moving = [i for i, run in enumerate(found) if run.status in STORE_BOUND_STATUSES]
    waits = await asyncio.gather(*(store_wait(client, found[i].run_id) for i in moving))
    for i, wait in zip(moving, waits, strict=True):
        found[i] = dataclasses.replace(found[i], held_up=wait)
    return found


# The statuses of a run that may be waiting on a store-bound activity (not on a person).
STORE_BOUND_STATUSES = frozenset({RunStatus.RUNNING.value, RunStatus.PLANNING.value})


async def store_wait(client: Client, run_id: str) -> str:
    """Why the run waits on a replica that is gone, or "": where replicas keep stores of
    their own (activities/store_queue.py), a run's store-bound activity goes to the queue
    of the one holding its store, and waits there, scheduled, while nobody polls it.
    Read from Temporal alone (the pending activity and the queue's pollers), so it is
    said with no worker answering queries. A queue counts as polled when a worker polled
    it within POLLER_SEEN_SECONDS: a stopped replica is said gone that long after."""
    try:
        description = await handle(client, run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return ""
        raise
    own = f"{description.task_queue}{STORE_QUEUE_SEPARATOR}"
    queues = {
        pending.activity_options.task_queue.name
        for pending in description.raw_description.pending_activities
        if pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
    }
    for queue in sorted(q for q in queues if q.startswith(own)):
        if not await polled(client, queue):
            return f"waiting: the replica holding its store (queue {queue}) is not polling"
    return ""


async def polled(client: Client, queue: str) -> bool:
    """Whether a worker polled the queue for activities lately (Temporal lists a stopped
    worker's poller for minutes; a live idle one polls again within a minute)."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        )
    )
    recent = time.time() - POLLER_SEEN_SECONDS
    return any(p.last_access_time.ToSeconds() >= recent for p in response.pollers)


async def listings(client: Client, query: str, limit: int) -> list[RunListing]:
    """Runs matching a visibility query, described by their search attributes alone."""
    found: list[RunListing] = []
    async for execution in client.list_workflows(query, limit=limit):
        attributes = execution.typed_search_attributes
        found.append(
            RunListing(
                run_id=execution.id,
                status=attributes.get(sa.STATUS) or "",
                step=attributes.get(sa.STEP),
                waiting_for=attributes.get(sa.WAITING_FOR) or "",
                temporal_status=execution.status.name.lower() if execution.status else "",
                started_at=execution.start_time.isoformat(timespec="seconds"),
                caller=execution.parent_id,
            )
        )
    return found


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


async def wait_for_outcome(client: Client, run_id: str) -> dict[str, Any]:
    """Wait for the run to close; the outcome as JSON-ready fields, failed runs included."""
    try:
        result = await wait_result(client, run_id)
        return result.model_dump(mode="json")
    except WorkflowFailureError as err:
        cause = err.cause
        # Cancelled through Temporal itself (the Web UI's button) ends as a cancellation.
        status = RunStatus.CANCELLED if isinstance(cause, CancelledError) else RunStatus.FAILED
        message = getattr(cause, "message", None) or str(cause)
        return {"run_id": run_id, "status": status.value, "error": message}


async def worker_answers(client: Client, run_id: str) -> bool:
    """Whether a worker answers for this run now (a query with a short deadline)."""
    try:
        await handle(client, run_id).query(
            "summary", result_type=RunSummary, rpc_timeout=timedelta(seconds=3)
        )
    except WorkflowQueryFailedError:
        return True  # a worker ran the query (and it failed): the update will say why
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunError(f"no run with id {run_id}") from None
        if WEDGED in err.message or await _failing_again(client, run_id):
            raise wedged(run_id) from None
        return False
    return True


KEPT_NOTE = "no worker answered: sent as a signal, kept by Temporal and applied when a worker runs"


async def decide(
    client: Client, run_id: str, request: DecideRequest, signer: Signer | None = None
) -> str:
    """Approve or reject. Through the `decide` update when a worker answers, so a refusal
    comes back at once; as a signal otherwise, which Temporal keeps until a worker runs.
    With a signer, the decision is signed for the very request it names and its arguments
    (which needs a worker to say what they are)."""
    if signer is not None:
        request = await _signed_decision(client, run_id, request, signer)
    elif not await worker_answers(client, run_id):
        decision = request.as_decision()
        await _signal(client, run_id, "approve" if request.approve else "reject", decision)
        return KEPT_NOTE
    decided = await _update(client, run_id, "decide", request, ApprovalRequest)
    return f"{decided.status.value}: {decided.tool} ({decided.request_id}) by {decided.decided_by}"


async def _signed_decision(
    client: Client, run_id: str, request: DecideRequest, signer: Signer
) -> DecideRequest:
    state = await _state_to_sign(client, run_id)
    return signed_decision(state, request, signer, await latest_moment(client, run_id))


def signed_decision(
    state: RunState, request: DecideRequest, signer: Signer, moment: RunEvent | None = None
) -> DecideRequest:
    """The decision signed for the request it names in this state, and its arguments;
    bound to `moment` (`latest_moment`, read after the state) where the run takes v3."""
    if (error := state.requests.decision_error(request)) is not None:
        raise RunError(f"refused: {error}")
    target = state.requests.find_pending_approval(request.request_id)
    assert target is not None, "decision_error() found it"
    signed = signer.approval(
        state.store_key,
        request.by,
        request.approve,
        target,
        request.comment,
        state.signature_version,
        moment,
    )
    return request.model_copy(update={"request_id": target.request_id, "signed": signed})


def signed_answer(
    state: RunState, reply: Answer, signer: Signer, moment: RunEvent | None = None
) -> Answer:
    """The answer signed for the question it names in this state, and its text (bound to
    `moment` as a decision is)."""
    if (error := state.requests.answer_error(reply)) is not None:
        raise RunError(f"refused: {error}")
    question = state.requests.find_pending_question(reply.question_id)
    assert question is not None, "answer_error() found it"
    signed = signer.answer(
        state.store_key, reply.by, question, reply.answer, state.signature_version, moment
    )
    return reply.model_copy(update={"question_id": question.question_id, "signed": signed})


async def _state_to_sign(client: Client, run_id: str) -> RunState:
    if not await worker_answers(client, run_id):
        raise RunError(
            f"no worker answered for {run_id}: a signed decision names the request's "
            "arguments, which only a running worker can tell; try again when one runs"
        )
    return await get_state(client, run_id)


async def answer(client: Client, run_id: str, reply: Answer, signer: Signer | None = None) -> str:
    if signer is not None:
        state = await _state_to_sign(client, run_id)
        reply = signed_answer(state, reply, signer, await latest_moment(client, run_id))
    elif not await worker_answers(client, run_id):
        await _signal(client, run_id, "answer", reply)
        return KEPT_NOTE
    question = await _update(client, run_id, "submit_answer", reply, Question)
    return f"answered {question.question_id}: {question.answer}"


async def edit(
    client: Client, run_id: str, patch: StatePatch, signer: Signer | None = None
) -> RunState:
    if signer is not None:
        identity, moment = await signing_point(client, run_id)
        signed = signer.change(identity, patch.by, "edit", patch.changes(), moment)
        patch = patch.model_copy(update={"signed": signed})
    return await _update(client, run_id, "edit", patch, RunState)


async def authorize_rewind(client: Client, run_id: str, request: RewindRequest) -> str:
    return await _update(client, run_id, "authorize_rewind", request, str)


async def run_identity(client: Client, run_id: str) -> str:
    """The identity a run's stored data and signatures belong to (workflow id @ its
    chain's first run id), from Temporal: no worker needs to answer."""
    try:
        described = await handle(client, run_id).describe()
    except RPCError as err:
        raise await not_acting(client, run_id, err) from None
    first = described.raw_description.workflow_execution_info.first_run_id
    return f"{run_id}{IDENTITY_SEPARATOR}{first or described.run_id}"


# How long a signer waits for the run's latest moment before signing without one (a run
# whose workers are down still takes the change, bound to no moment).
MOMENT_WAIT_SECONDS = 5.0


async def signing_point(client: Client, run_id: str) -> tuple[str, RunEvent | None]:
    """What a change to the run itself is signed for: the run's identity and its latest
    moment (the `events` query), so the change counts in this timeline only
    (workflows/signing.py, `bound_nonce`)."""
    return await run_identity(client, run_id), await latest_moment(client, run_id)


async def latest_moment(client: Client, run_id: str) -> RunEvent | None:
    """The run's latest moment (the `events` query), which a signature binds; None when
    no worker answered within MOMENT_WAIT_SECONDS (the signature is bound to none)."""
    try:
        page = await handle(client, run_id).query(
            "events", result_type=EventPage, rpc_timeout=timedelta(seconds=MOMENT_WAIT_SECONDS)
        )
    except (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError):
        return None
    return page.events[-1] if page.events else None


def budget_raise(
    by: str,
    *,
    usd: float | None = None,
    tokens: int | None = None,
    tool_calls: int | None = None,
    seconds: float | None = None,
    comment: str = "",
) -> BudgetRaise:
    """A new budget from a person's figures, or RunError saying in one line what is wrong."""
    try:
        return BudgetRaise(
            by=by, usd=usd, tokens=tokens, tool_calls=tool_calls, seconds=seconds, comment=comment
        )
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RunError(f"invalid budget: {where}: {first['msg']}") from None


async def raise_budget(
    client: Client, run_id: str, raise_: BudgetRaise, signer: Signer | None = None
) -> RunBudget:
    """Give a run (and the sub-agent it waits on) a new budget; a run waiting at its
    budget goes on. With a signer, the raise is signed (a run requiring signed changes
    counts no other)."""
    if signer is not None:
        identity, moment = await signing_point(client, run_id)
        signed = signer.change(identity, raise_.by, "raise_budget", raise_.what_it_says(), moment)
        raise_ = raise_.model_copy(update={"signed": signed})
    return await _update(client, run_id, "raise_budget", raise_, RunBudget)


async def pause(client: Client, run_id: str, actor: Actor, signer: Signer | None = None) -> None:
    await _act(client, run_id, "pause", actor, signer)


async def resume(client: Client, run_id: str, actor: Actor, signer: Signer | None = None) -> None:
    await _act(client, run_id, "resume", actor, signer)


async def cancel(client: Client, run_id: str, actor: Actor, signer: Signer | None = None) -> None:
    await _act(client, run_id, "cancel", actor, signer)


async def _act(
    client: Client,
    run_id: str,
    verb: Literal["pause", "resume", "cancel"],
    actor: Actor,
    signer: Signer | None,
) -> None:
    if signer is not None:
        identity, moment = await signing_point(client, run_id)
        signed = signer.change(identity, actor.by, verb, actor.what_it_says(), moment)
        actor = actor.model_copy(update={"signed": signed})
    await _signal(client, run_id, verb, actor)


async def _update(
    client: Client, run_id: str, name: str, payload: BaseModel, result_type: type[T]
) -> T:
    # Refused before it is sent: an update to a wedged run waits for Temporal to give up,
    # and one given up on by the caller could still apply once the run recovers.
    if await _failing_again(client, run_id):
        raise wedged(run_id)
    try:
        result: T = await handle(client, run_id).execute_update(
            name, payload, result_type=result_type
        )
        return result
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        raise RunError(f"refused: {getattr(cause, 'message', None) or cause}") from None
    except RPCError as err:
        raise await not_acting(client, run_id, err) from None


async def not_acting(client: Client, run_id: str, err: RPCError) -> RunError:
    """Why a run took no signal or update: gone, closed, or the server said something else."""
    if WEDGED in err.message:
        return wedged(run_id)
    if err.status != RPCStatusCode.NOT_FOUND and "already completed" not in err.message:
        return RunError(f"run {run_id} did not take it: {err.message}")
    try:
        status = await recorded_status(client, run_id)
    except RunError as missing:
        return missing
    return RunError(f"run {run_id} is closed ({status}); it takes no more actions")


@dataclass(frozen=True)
class InboxItem:
    run_id: str
    waiting_for: str
    step: int | None
    detail: str
    # A sub-agent's run: the run that delegated to it; an agent a workflow called with
    # `run_agent`: that workflow's id (the id its team knows).
    parent: str | None = None


WAITING_VALUES = ("approval", "input", "resume")


async def list_waiting(
    client: Client,
    waiting_for: tuple[str, ...] = WAITING_VALUES,
    limit: int = 200,
    task_queue: str | None = None,
) -> list[RunListing]:
    """Running runs that wait for a human (for any of `waiting_for`), by search attribute;
    of one task queue (one deployment), or of the namespace."""
    waiting = ", ".join(f"'{v}'" for v in waiting_for)
    query = (
        f"WorkflowType = '{WORKFLOW_TYPE}' AND ExecutionStatus = 'Running' "
        f"AND {sa.WAITING_FOR.name} IN ({waiting})"
    )
    if task_queue is not None:
        query += f" AND TaskQueue = '{task_queue}'"
    return await listings(client, query, limit)


async def inbox(client: Client, limit: int = 200, task_queue: str | None = None) -> list[InboxItem]:
    """Every running run that waits for a human, and for what. The runs are asked at once
    (a few at a time): a run whose worker is gone costs its 2 s timeout once, not in turn."""
    waiting = await list_waiting(client, limit=limit, task_queue=task_queue)
    gate = asyncio.Semaphore(INBOX_QUERIES_AT_ONCE)

    async def summary_of(run_id: str) -> RunSummary | None:
        async with gate:
            return await _waiting_summary(client, run_id)

    summaries = await asyncio.gather(*(summary_of(run.run_id) for run in waiting))
    return [
        InboxItem(
            run_id=run.run_id,
            waiting_for=run.waiting_for,
            step=run.step,
            detail=_waiting_detail(summary),
            parent=summary.delegated_by.run_id if summary and summary.delegated_by else run.caller,
        )
        for run, summary in zip(waiting, summaries, strict=True)
    ]


INBOX_QUERIES_AT_ONCE = 20


async def _waiting_summary(client: Client, run_id: str) -> RunSummary | None:
    try:
        summary: RunSummary = await handle(client, run_id).query(
            "summary", result_type=RunSummary, rpc_timeout=timedelta(seconds=2)
        )
    except RPCError:
        return None
    return summary


def _waiting_detail(summary: RunSummary | None) -> str:
    if summary is None:
        return "(no worker answered; details unavailable)"
    parts = [f"{a.tool} {a.arguments} [{a.request_id}]" for a in summary.pending_approvals]
    parts += [f"question: {q.question} [{q.question_id}]" for q in summary.pending_questions]
    return "; ".join(parts) or summary.progress
