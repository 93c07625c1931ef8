"""The recorded runs a what-if plays again, read from their histories (from Temporal, or
exported files) and our stores: how each started, every tool call with what it returned,
how people decided, what they wrote in a conversation, and the sub-agents it delegated
to. Nothing here writes anything."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.service import RPCError

from durable_agents.activities.shadow import RecordedCall
from durable_agents.activities.stores import Stores
from durable_agents.control import timeline
from durable_agents.control.runs import RunError, check_run_id
from durable_agents.control.stored import check_reachable, store_errors
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.activity_io import ModelCallInput, ToolCallInput, ToolOutcome
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RunRequest, RunResult
from durable_agents.workflows.conversation_records import UserMessage
from durable_agents.workflows.records import ApprovalStatus, workflow_id_of
from durable_agents.workflows.state import RunState
from durable_agents.workflows.whatif import (
    RecordedAnswer,
    RecordedDecision,
    RecordedDelegation,
    ShadowSpec,
    Unmatched,
)

TOOL_ACTIVITIES = ("run_tool", "call_mcp_tool")
# How deep a tree of sub-agents a what-if follows (deeper children are simulated).
MAX_DEPTH = 5


@dataclass(frozen=True)
class RecordedRun:
    """One recorded run, as a what-if needs it."""

    run_id: str
    request: RunRequest
    state: RunState  # its last state, replayed from its history
    result: RunResult | None  # None: it has not ended
    calls: list[RecordedCall]
    messages: list[UserMessage]  # a conversation's, in the order they were taken
    children: dict[str, RecordedRun] = field(default_factory=dict)
    source: str = "temporal"  # or the history file's path

    @property
    def agent(self) -> str | None:
        return self.request.agent

    @property
    def store_key(self) -> str:
        return self.state.store_key

    def tree(self) -> list[RecordedRun]:
        """This run and every recorded sub-agent under it."""
        return [self, *(run for child in self.children.values() for run in child.tree())]

    def tree_calls(self) -> list[tuple[str, RecordedCall]]:
        """Every tool call of the tree, each with the run that made it."""
        return [(run.run_id, call) for run in self.tree() for call in run.calls]

    def shadow_spec(self, unmatched: Unmatched) -> ShadowSpec:
        """What its shadow carries: people's decisions and answers, and its children's."""
        decisions = [
            RecordedDecision(
                tool=a.tool,
                arguments=a.arguments,
                approved=a.status is ApprovalStatus.APPROVED,
                by=(a.decided_by or "?")[:100],
                comment=a.comment[:2000],
            )
            for a in self.state.approvals
            if not a.is_budget and a.status is not ApprovalStatus.PENDING
        ]
        answers = [
            RecordedAnswer(question=q.question[:4000], answer=q.answer, by=q.answered_by)
            for q in self.state.questions
        ]
        delegations = [
            RecordedDelegation(
                tool=d.tool,
                task=d.task[:4000],
                child=self.children[d.child_id].shadow_spec(unmatched),
            )
            for d in self.state.delegations
            if d.child_id in self.children
        ]
        return ShadowSpec(
            of=self.run_id,
            store_of=self.store_key,
            decisions=decisions,
            answers=answers,
            delegations=delegations,
            unmatched=unmatched,
        )


async def recorded_run(
    client: Client, stores: Stores, run_id: str, *, depth: int = 0
) -> RecordedRun:
    """A run as Temporal keeps it: its whole continue-as-new chain."""
    chain = [history for _, history in await timeline.fetch_chain(client, run_id)]
    found = await _read(client.data_converter, stores, run_id, chain, "temporal")
    if depth < MAX_DEPTH:
        for child in found.state.delegations:
            try:
                found.children[child.child_id] = await recorded_run(
                    client, stores, child.child_id, depth=depth + 1
                )
            except RunError:
                continue  # its shadow is simulated throughout; the report says so
    return found


@dataclass(frozen=True)
class Matching:
    """Which closed runs a visibility query finds: an agent's, closed within some time,
    matching a query of the caller's too; at most `limit`."""

    agent: str | None = None
    closed_within: timedelta | None = None
    query: str | None = None
    limit: int = 100

    def __post_init__(self) -> None:
        if self.closed_within is not None and not isinstance(self.closed_within, timedelta):
            raise RunError("closed_within is a timedelta (timedelta(days=7))")
        if self.closed_within is not None and self.closed_within <= timedelta(0):
            raise RunError("closed_within is more than nothing")
        if not isinstance(self.limit, int) or not 1 <= self.limit <= 1000:
            raise RunError(f"limit is 1 to 1,000 runs, not {self.limit!r}")

    @property
    def asked(self) -> bool:
        return any(v is not None for v in (self.agent, self.closed_within, self.query))


async def recorded_runs_matching(
    client: Client,
    stores: Stores,
    task_queue: str,
    matching: Matching,
    skipped: Callable[[str], None] = lambda why: None,
) -> list[RecordedRun]:
    """The closed runs on our task queue (never shadows: theirs is a what-if queue) that a
    visibility query names, newest first. Sub-agents' runs are left out: their parent's
    what-if plays them again. A run that cannot be read (a fork, a history the code here
    no longer replays) is skipped, said."""
    found: list[RecordedRun] = []
    closed = _closed_runs(client, task_queue, matching.closed_within, matching.query)
    async for run_id in closed:
        try:
            recorded = await recorded_run(client, stores, run_id)
        except RunError as err:
            skipped(f"skipped {run_id}: {err}")
            continue
        if recorded.request.delegated_by is not None:
            continue
        if matching.agent is not None and recorded.agent != matching.agent:
            continue
        found.append(recorded)
        if len(found) >= matching.limit:
            break
    return found


async def _closed_runs(
    client: Client, task_queue: str, closed_within: timedelta | None, query: str | None
) -> AsyncIterator[str]:
    wanted = (
        f"WorkflowType = '{AgentWorkflow.__name__}' AND TaskQueue = '{task_queue}' "
        "AND ExecutionStatus != 'Running' AND ExecutionStatus != 'ContinuedAsNew'"
    )
    if closed_within is not None:
        since = datetime.now(UTC) - closed_within
        wanted += f" AND CloseTime > '{since.isoformat(timespec='seconds')}'"
    if query:
        wanted += f" AND ({query})"
    seen: set[str] = set()
    try:
        async for execution in client.list_workflows(wanted):
            if execution.id in seen or execution.parent_id:
                continue
            seen.add(execution.id)
            yield execution.id
    except RPCError as err:
        raise RunError(f"the visibility query was refused: {err.message}") from None


async def recorded_file(converter: DataConverter, stores: Stores, path: Path) -> RecordedRun:
    """A run exported to a file (`agentctl history export`, the Web UI's download)."""
    try:
        history = timeline.agent_history(path)
    except (OSError, ValueError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else err
        raise RunError(f"{path} is not a history file of an agent run: {reason}") from None
    return await _read(converter, stores, history.workflow_id, [history], str(path))


async def _read(
    converter: DataConverter,
    stores: Stores,
    run_id: str,
    chain: Sequence[WorkflowHistory],
    source: str,
) -> RecordedRun:
    events = [event for history in chain for event in history.events]
    if not events:
        raise RunError(f"{run_id} has no history")
    request = await _decoded(converter, _start_payloads(events[0]), RunRequest, run_id)
    if not isinstance(request, RunRequest) or request.resumes or request.fork is not None:
        raise RunError(f"{run_id} did not start as a run of its own (a fork or a resumed run)")
    if request.shadow is not None:
        raise RunError(f"{run_id} is itself a what-if shadow")
    state = await timeline.final_state(run_id, chain, converter)
    # The key its rows are stored under, as its own activities were sent it: a history
    # file's name need not be the run's id (a replay of it takes the name for one).
    store_key = await _stored_under(converter, events, run_id) or state.store_key
    if store_key != state.store_key:
        state = state.model_copy(
            update={"identity": store_key, "run_id": workflow_id_of(store_key)}
        )
        run_id = state.run_id
    calls = await _calls(converter, stores, store_key, events, run_id)
    return RecordedRun(
        run_id=run_id,
        request=request,
        state=state,
        result=await _result(converter, events[-1], run_id),
        calls=calls,
        messages=await _messages(converter, events, run_id),
        source=source,
    )


async def _stored_under(
    converter: DataConverter, events: list[HistoryEvent], run_id: str
) -> str | None:
    for event in events:
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        attrs = event.activity_task_scheduled_event_attributes
        if attrs.activity_type.name == "call_model":
            call = await _decoded(converter, attrs.input.payloads, ModelCallInput, run_id)
            return str(call.run_id)
    return None


def _start_payloads(event: HistoryEvent) -> Any:
    return event.workflow_execution_started_event_attributes.input.payloads


async def _decoded(converter: DataConverter, payloads: Any, kind: type, run_id: str) -> Any:
    try:
        [value] = await converter.decode(payloads, [kind])
    except Exception as err:  # an encrypted history without its key, a foreign payload
        raise RunError(f"cannot read the history of {run_id}: {err}") from None
    return value


async def _calls(
    converter: DataConverter,
    stores: Stores,
    store_key: str,
    events: list[HistoryEvent],
    run_id: str,
) -> list[RecordedCall]:
    """Every tool call the run made, in order, with what the model read back: the text
    our transcript keeps, or the history's preview when the store has no row for it."""
    scheduled: dict[int, ToolCallInput] = {}
    calls: list[RecordedCall] = []
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name in TOOL_ACTIVITIES:
                call = await _decoded(converter, attrs.input.payloads, ToolCallInput, run_id)
                scheduled[event.event_id] = call
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            done = event.activity_task_completed_event_attributes
            call = scheduled.pop(done.scheduled_event_id, None)
            if call is None:
                continue
            outcome = await _decoded(converter, done.result.payloads, ToolOutcome, run_id)
            stored = stores.transcript.read_one(store_key, call.result_seq)
            text = str((stored or {}).get("content") or outcome.summary)
            calls.append(
                RecordedCall(
                    tool=call.name,
                    arguments=call.arguments,
                    text=text,
                    ok=outcome.ok,
                    side_effect=call.key is not None,
                )
            )
    return calls


async def _result(converter: DataConverter, last: HistoryEvent, run_id: str) -> RunResult | None:
    if last.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        return None
    payloads = last.workflow_execution_completed_event_attributes.result.payloads
    result = await _decoded(converter, payloads, RunResult, run_id)
    return result if isinstance(result, RunResult) else None


async def _messages(
    converter: DataConverter, events: list[HistoryEvent], run_id: str
) -> list[UserMessage]:
    """A conversation's messages, in the order the run accepted them (each once)."""
    found: dict[str, UserMessage] = {}
    for event in events:
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            continue
        update = event.workflow_execution_update_accepted_event_attributes.accepted_request
        if update.input.name != "send_message":
            continue
        message = await _decoded(converter, update.input.args.payloads, UserMessage, run_id)
        if isinstance(message, UserMessage) and message.message_id not in found:
            found[message.message_id] = message
    return list(found.values())


async def recorded_runs(
    client: Client,
    settings: Settings,
    *,
    run_ids: Sequence[str] = (),
    files: Sequence[Path] = (),
    matching: Matching = Matching(),
    skipped: Callable[[str], None] = lambda why: None,
) -> list[RecordedRun]:
    """The runs a what-if plays again: those named, those in history files, and those a
    visibility query finds (when `matching` asks for any); each once."""
    if isinstance(run_ids, str) or isinstance(files, str | Path):
        raise RunError("run_ids and files are lists (of run ids, of paths)")
    run_ids = [check_run_id(run_id) for run_id in run_ids]
    files = [Path(path) for path in files]
    check_reachable(settings)
    with store_errors(settings):
        stores = Stores.open(settings)
    found = [await recorded_run(client, stores, run_id) for run_id in run_ids]
    found += [await recorded_file(client.data_converter, stores, path) for path in files]
    if matching.asked:
        found += await recorded_runs_matching(
            client, stores, settings.task_queue, matching, skipped
        )
    found = list({run.store_key: run for run in found}.values())
    for run in found:
        if run.request.delegated_by is not None:
            raise RunError(
                f"{run.run_id} is a sub-agent's run: play its parent "
                f"{run.request.delegated_by.run_id} again, which plays it too"
            )
    if not found:
        raise RunError("no recorded runs found to play again")
    return found
