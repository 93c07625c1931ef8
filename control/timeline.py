"""Time travel on the client: rebuild every moment of a run by replaying its history
through the workflow code, export and replay histories, fork and rewind."""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, ResetReapplyExcludeType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.service import RPCError
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from durable_agents.control.agents import local_agents
from durable_agents.control.runs import (
    RunError,
    StartedRun,
    authorize_rewind,
    check_run_id,
    new_run_id,
    signing_point,
    start_run,
    started_request,
)
from durable_agents.control.signer import Signer
from durable_agents.runtime import operator_files, sandbox
from durable_agents.runtime.chains import chain_starts
from durable_agents.runtime.client import as_worker_reads
from durable_agents.runtime.settings import Settings
from durable_agents.workflows import timeline
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import ForkSpec, RunRequest
from durable_agents.workflows.people_inputs import RewindRequest, StatePatch
from durable_agents.workflows.registry import AgentRegistry, serve_for_replay
from durable_agents.workflows.state import RunState, carried_state, forked, patch_error
from durable_agents.workflows.timeline import Moment

# The workflow code installed here: what a replay checks a history against.
CODE_HERE: tuple[type, ...] = (AgentWorkflow,)


# The agents a replay serves when its caller names none: this process's AGENT_MODULES,
# unless a client of its own agents (AgentClient(agents=...)) is replaying.
_REPLAY_AGENTS: ContextVar[AgentRegistry | None] = ContextVar("replay_agents", default=None)


@contextmanager
def replaying_with(agents: AgentRegistry | None) -> Iterator[None]:
    """Replays in this block serve `agents` (None: this process's AGENT_MODULES)."""
    token = _REPLAY_AGENTS.set(agents)
    try:
        yield
    finally:
        _REPLAY_AGENTS.reset(token)


def replayer(
    converter: DataConverter = pydantic_data_converter,
    agents: AgentRegistry | None = None,
    workflows: Sequence[type] = CODE_HERE,
    sandboxed: bool = True,
) -> Replayer:
    """The workflow code, replaying; workflows.timeline is shared with the sandbox so the
    recording made here hears what the workflow offers in there. `converter` must be the
    client's: an encrypted run's history decodes only through its codec, read as a worker
    reads it (what the worker refused is refused again). The agents are
    this process's (AGENT_MODULES), as a worker's would be. `workflows`: another build's
    code (a test's variant of the agent workflow), else the code here.

    A release check replays in the sandbox, as a worker runs the code. Time travel need not:
    a replay still fails on any command that differs from the history, and the sandbox
    made rebuilding a 500-step run take a third longer."""
    # With keys, a history is read as the worker read it: unsealed hand-offs refused.
    sealing = as_worker_reads(converter).payload_codec is not None
    serve_for_replay(agents or _REPLAY_AGENTS.get() or local_agents(), trusts_the_clear=not sealing)
    runner: WorkflowRunner = UnsandboxedWorkflowRunner()
    if sandboxed:
        runner = SandboxedWorkflowRunner(restrictions=sandbox.restrictions(timeline=True))
    return Replayer(
        workflows=list(workflows), data_converter=as_worker_reads(converter), workflow_runner=runner
    )


@dataclass(frozen=True)
class Timeline:
    run_id: str
    # (Temporal run id, its history), oldest first: every run of the continue-as-new chain,
    # or only those replayed for the moments asked for (`rebuild(only=...)`).
    chain: list[tuple[str, WorkflowHistory]]
    moments: list[Moment]
    current_run: str  # the chain's last run, where the workflow is now

    @property
    def history(self) -> WorkflowHistory:
        """The history of the run now current (the last of a continue-as-new chain)."""
        return next(history for run, history in self.chain if run == self.current_run)

    def history_of(self, moment: Moment) -> WorkflowHistory:
        return next(history for run, history in self.chain if run == moment.run_id)

    def at(self, index: int) -> Moment:
        if not self.moments:
            raise RunError(f"run {self.run_id} has no moments yet")
        for moment in self.moments:
            if moment.index == index:
                return moment
        if self.chain[-1][0] != self.current_run:  # only earlier runs replayed
            raise RunError(f"run {self.run_id} has no step {index}")
        first, last = self.moments[0].index, self.moments[-1].index
        raise RunError(f"run {self.run_id} has steps {first} to {last}; there is no step {index}")


@dataclass(frozen=True)
class ChainRun:
    """One run of a continue-as-new chain, read from its first event alone."""

    run: str  # the Temporal run id
    after_moment: int  # the moment the run resumed after: it holds the moments past it


async def fetch_history(client: Client, run_id: str) -> WorkflowHistory:
    try:
        return await client.get_workflow_handle(run_id).fetch_history()
    except RPCError as err:
        raise RunError(f"cannot read the history of {run_id}: {err.message}") from None


async def chain_runs(client: Client, run_id: str) -> list[ChainRun]:
    """The runs of a continue-as-new chain, oldest first, from one event of each."""
    try:
        starts = await chain_starts(client, run_id)
    except RPCError as err:
        raise RunError(f"cannot read the history of {run_id}: {err.message}") from None
    return [ChainRun(run, await _resumed_after(client, first)) for run, first in starts]


async def _resumed_after(client: Client, first: HistoryEvent) -> int:
    """The last moment before a run began: its carried state's, 0 for a chain's first."""
    started = first.workflow_execution_started_event_attributes
    if not started.continued_execution_run_id:
        return 0
    request = await started_request(client.data_converter, first)
    carried = carried_state(request) if request is not None else None
    return carried.moment if carried is not None else 0


def holding(chain: list[ChainRun], indexes: Collection[int]) -> list[ChainRun]:
    """The runs of the chain that hold these moments: the last run that resumed before
    each (a moment past the end is looked for in the current run)."""
    wanted = {
        next(run for run in reversed(chain) if run.after_moment < index or run is chain[0])
        for index in indexes
    }
    return [run for run in chain if run in wanted]


async def fetch_chain(client: Client, run_id: str) -> list[tuple[str, WorkflowHistory]]:
    """Every run of a continue-as-new chain, oldest first, each with its history."""
    return [
        (run.run, await _fetch_run(client, run_id, run.run))
        for run in await chain_runs(client, run_id)
    ]


async def _fetch_run(client: Client, run_id: str, temporal_run: str) -> WorkflowHistory:
    return await client.get_workflow_handle(run_id, run_id=temporal_run).fetch_history()


async def rebuild(
    client: Client, run_id: str, only: Collection[int] | None = None, *, states: bool = True
) -> Timeline:
    """The moments of the run, replayed from the histories through the current code: of
    every run of its continue-as-new chain, or with `only`, of just the runs that hold
    those moments, each from the state it started with (time travel to a step of a long
    chain replays one run, not the chain). Every moment keeps its place and a glance at
    its state; the whole state is kept for the moments in `only`, else for every moment
    unless `states` is False (a timeline that lists, and reads no state whole)."""
    runs = await chain_runs(client, run_id)
    picked = runs if only is None else holding(runs, only)
    chain = [(run.run, await _fetch_run(client, run_id, run.run)) for run in picked]
    kept = only if only is not None else None if states else ()
    replaying = replayer(client.data_converter, sandboxed=False)
    temporal_runs = [temporal_run for temporal_run, _ in chain]
    with timeline.recording(run_id, temporal_runs, states=kept) as recorded:
        for temporal_run, history in chain:
            result = await replaying.replay_workflow(history, raise_on_replay_failure=False)
            if result.replay_failure is not None:
                raise RunError(f"cannot replay {run_id} ({temporal_run}): {result.replay_failure}")
    moments = [recorded[i] for i in sorted(recorded)]
    return Timeline(run_id, chain, moments, current_run=runs[-1].run)


async def final_state(
    run_id: str, chain: Sequence[WorkflowHistory], converter: DataConverter
) -> RunState:
    """A run's last state, replayed from its histories (a chain's, oldest first): the last
    run's moments are found first without their states, then it is replayed once more
    keeping only the last one's (a long run's every state is most of what a replay costs)."""
    replaying = replayer(converter, sandboxed=False)

    async def replay(histories: Sequence[WorkflowHistory]) -> None:
        for history in histories:
            result = await replaying.replay_workflow(history, raise_on_replay_failure=False)
            if result.replay_failure is not None:
                raise RunError(f"cannot replay {run_id}: {_failure_line(result.replay_failure)}")

    # A run of a chain replays from the state it carried: its last run alone holds the last
    # moment, unless it ended before reaching one.
    with timeline.recording(run_id, None, states=()) as glanced:
        await replay(chain[-1:])
    if not glanced and len(chain) > 1:
        with timeline.recording(run_id, None, states=()) as glanced:
            await replay(chain)
    if not glanced:
        raise RunError(f"{run_id} has no moments to read a state from")
    last = max(glanced)
    with timeline.recording(run_id, None, states={last}) as kept:
        await replay(chain[-1:])
    if last not in kept:
        raise RunError(f"cannot rebuild the last state of {run_id}")
    return kept[last].state


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{path}.{key}" if path else str(key)))
        return out
    if isinstance(value, list):
        out = {}
        for i, item in enumerate(value):
            out.update(flatten(item, f"{path}[{i}]"))
        return out or {path: []}
    return {path: value}


def diff(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(path, old, new) for every leaf that changed; a missing side is None."""
    flat_before, flat_after = flatten(before), flatten(after)
    paths = sorted(set(flat_before) | set(flat_after))
    missing = object()
    changes = []
    for path in paths:
        old, new = flat_before.get(path, missing), flat_after.get(path, missing)
        if old != new:
            changes.append((path, None if old is missing else old, None if new is missing else new))
    return changes


async def fork(
    client: Client,
    settings: Settings,
    run_id: str,
    moment_index: int,
    edit: StatePatch | None = None,
    new_id: str | None = None,
    by: str | None = None,
    signer: Signer | None = None,
) -> StartedRun:
    """A new run from the state at a moment: the phase in progress there starts over.
    With a signer, the fork is signed for this parent, moment, edit and new id (a parent
    whose policy requires signed changes counts no other)."""
    moment = (await rebuild(client, run_id, only={moment_index})).at(moment_index)
    state = moment.state
    if edit is not None:
        error = patch_error(forked(state, "check", run_id, moment.at), edit)
        if error is not None:
            raise RunError(f"the edit is refused: {error}")
    new_id = check_run_id(new_id or new_run_id())
    spec = ForkSpec(parent_run_id=run_id, state=state.model_dump(mode="json"), edit=edit, by=by)
    if signer is not None:
        says = spec.what_it_says(new_id)
        spec.signed = signer.change(state.store_key, by or "anonymous", "fork", says)
    request = RunRequest(
        goal=state.goal,
        label=state.label,
        agent=state.agent.name if state.agent else None,
        policy=state.policy,
        limits=state.limits,
        fork=spec,
    )
    memo = {"parent_run_id": run_id, "parent_moment": moment_index}
    return await start_run(client, settings, request, new_id, memo=memo)


ACTIVITY_MOMENTS = ("model", "tool")


def reset_point(found: Timeline, moment: Moment) -> int:
    """The workflow-task completion to reset to so the run resumes at this moment.

    Temporal's reset redoes the workflow task whose completion it names. A moment that
    waits on an activity is resumed by redoing its own task (the activity is scheduled
    afresh); any other moment by keeping its task and redoing the next one, in which
    whatever came next (a decision, say) is applied again.
    """
    if moment.run_id != found.current_run:
        raise RunError(
            f"step {moment.index} is in an earlier run of {found.run_id}'s continue-as-new "
            "chain; Temporal resets only the current one: fork from that step instead"
        )
    completions = [
        event.event_id
        for event in found.history.events
        if event.event_id > moment.history_length
        and event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    ]
    wanted = 0 if moment.kind in ACTIVITY_MOMENTS else 1
    if len(completions) <= wanted:
        raise RunError(f"nothing to rewind: step {moment.index} is where {found.run_id} is now")
    return completions[wanted]


async def rewind(
    client: Client, run_id: str, moment_index: int, by: str, signer: Signer | None = None
) -> str:
    """Go back to a moment in the same run (Temporal's reset); returns the new execution's
    id. Tool calls after it run again under the same keys, so the ledger answers them.
    An open run whose policy requires signed changes is asked first (`authorize_rewind`,
    signed with `signer`): it refuses, and records, a rewind that is not signed."""
    found = await rebuild(client, run_id, only={moment_index})
    finish = reset_point(found, found.at(moment_index))
    await _authorized_rewind(client, found, moment_index, by, signer)
    excluded = []
    if found.at(moment_index).state.conversation is not None:
        excluded += [
            ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE,
            ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL,
        ]
    try:
        response = await client.workflow_service.reset_workflow_execution(
            ResetWorkflowExecutionRequest(
                namespace=client.namespace,
                workflow_execution=WorkflowExecution(workflow_id=run_id),
                reason=f"agentctl rewind to step {moment_index} by {by}",
                workflow_task_finish_event_id=finish,
                request_id=str(uuid.uuid4()),
                # A conversation goes back to that turn: nothing people sent after it
                # (messages, decisions, a close) is applied again.
                reset_reapply_exclude_types=excluded,
            )
        )
    except RPCError as err:
        raise RunError(f"Temporal refused the rewind: {err.message}") from None
    return str(response.run_id)


async def _authorized_rewind(
    client: Client, found: Timeline, moment_index: int, by: str, signer: Signer | None
) -> None:
    state = found.at(moment_index).state
    if not state.policy.require_signed_decisions:
        return
    description = await client.get_workflow_handle(found.run_id).describe()
    if description.status != WorkflowExecutionStatus.RUNNING:
        raise RunError(
            f"run {found.run_id} is closed and its policy requires signed changes: a closed "
            "run cannot check a rewind, fork it from that step instead"
        )
    request = RewindRequest(by=by, moment=moment_index)
    if signer is not None:
        identity, latest = await signing_point(client, found.run_id)
        request.signed = signer.change(identity, by, "rewind", request.what_it_says(), latest)
    await authorize_rewind(client, found.run_id, request)


def export_history(history: WorkflowHistory, path: Path) -> None:
    """The format of the Web UI's download and `temporal workflow show -o json`."""
    try:
        path.write_text(history.to_json())
    except OSError as err:
        raise RunError(f"cannot write {path}: {err.strerror or err}") from None


@dataclass(frozen=True)
class ReplayOutcome:
    path: Path
    ok: bool
    event_id: int | None
    message: str
    event_type: str | None = None  # the event at event_id, as the Web UI names it


@dataclass(frozen=True)
class Verdict:
    """What replaying one history through some workflow code found."""

    ok: bool
    event_id: int | None
    event_type: str | None
    message: str


async def replay_history(
    history: WorkflowHistory,
    converter: DataConverter = pydantic_data_converter,
    workflows: Sequence[type] = CODE_HERE,
) -> Verdict:
    """Replay a history through `workflows`: clean, or where and why it parts ways."""
    result = await replayer(converter, workflows=workflows).replay_workflow(
        history, raise_on_replay_failure=False
    )
    failure = result.replay_failure
    if failure is None:
        return Verdict(True, None, None, "replays cleanly")
    found = re.search(r"event\W{0,2}id\W{0,2}(\d+)", str(failure), re.IGNORECASE)
    event_id = (
        int(found.group(1)) if found else await divergence_event(history, converter, workflows)
    )
    return Verdict(False, event_id, event_name(history, event_id), _failure_line(failure))


def event_name(history: WorkflowHistory, event_id: int | None) -> str | None:
    """TimerStarted for EVENT_TYPE_TIMER_STARTED: the Web UI's name of an event."""
    for event in history.events:
        if event.event_id == event_id:
            words = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").split("_")
            return "".join(word.capitalize() for word in words)
    return None


def agent_history(path: Path) -> WorkflowHistory:
    """A history file of an agent run, or ValueError saying why not: the SDK's core panics
    and hangs on some histories it cannot start from, so they never reach it."""
    history = WorkflowHistory.from_json(
        path.stem, operator_files.load_json(path, operator_files.HISTORY_FILE_BYTES)
    )
    events = list(history.events)
    if not events or events[0].event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        raise ValueError("it does not begin with a WorkflowExecutionStarted event")
    started = events[0].workflow_execution_started_event_attributes
    if started.workflow_type.name != AgentWorkflow.__name__:
        raise ValueError(f"it is a {started.workflow_type.name!r} run, not an agent run")
    return history


async def under_its_own_id(
    history: WorkflowHistory, converter: DataConverter = pydantic_data_converter
) -> WorkflowHistory:
    """A continued run's history under the workflow id its carried state names, whatever
    the file is called: the workflow refuses state carried under another id. A start it
    cannot read is left as it is (the replay then says what is wrong with it)."""
    started = history.events[0].workflow_execution_started_event_attributes
    if not started.continued_execution_run_id:
        return history
    request = await started_request(as_worker_reads(converter), history.events[0])
    try:
        state = carried_state(request) if request is not None else None
    except Exception:  # a state it cannot read: the replay reports it
        return history
    if state is None:
        return history
    return WorkflowHistory(workflow_id=state.run_id, events=history.events)


async def replay_files(
    paths: list[Path],
    converter: DataConverter = pydantic_data_converter,
    workflows: Sequence[type] = CODE_HERE,
) -> list[ReplayOutcome]:
    outcomes = []
    for path in paths:
        try:
            history = await under_its_own_id(agent_history(path), converter)
        except (OSError, ValueError) as err:
            reason = err.strerror if isinstance(err, OSError) and err.strerror else err
            outcomes.append(ReplayOutcome(path, False, None, f"not a history file: {reason}"))
            continue
        verdict = await replay_history(history, converter, workflows)
        outcomes.append(
            ReplayOutcome(path, verdict.ok, verdict.event_id, verdict.message, verdict.event_type)
        )
    return outcomes


def _failure_line(failure: Exception) -> str:
    """The SDK wraps a workflow's own error ("no agent named …") in a long activation
    failure: its message alone, when there is one."""
    text = str(failure)
    inner = re.search(r'message: "((?:[^"\\]|\\.)*)"', text)
    return inner.group(1) if inner else f"{type(failure).__name__}: {text}"


async def divergence_event(
    history: WorkflowHistory,
    converter: DataConverter = pydantic_data_converter,
    workflows: Sequence[type] = CODE_HERE,
) -> int | None:
    """The first event whose recorded command the current code no longer issues.

    Replays prefixes of the history, cut after each workflow task's commands, and finds by
    bisection the first task that fails; its first command event is where it diverged.
    """
    events = list(history.events)
    completed = [
        i
        for i, e in enumerate(events)
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    ]

    def cut_after(task: int) -> int:
        start = completed[task] + 1
        for i in range(start, len(events)):
            if events[i].event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
                return i
        return len(events)

    async def fails(task: int) -> bool:
        prefix = WorkflowHistory(history.workflow_id, events[: cut_after(task)])
        result = await replayer(converter, workflows=workflows).replay_workflow(
            prefix, raise_on_replay_failure=False
        )
        return result.replay_failure is not None

    low, high = 0, len(completed) - 1
    if high < 0 or not await fails(high):
        return None
    while low < high:
        middle = (low + high) // 2
        if await fails(middle):
            high = middle
        else:
            low = middle + 1
    first_command = completed[low] + 1
    return events[first_command].event_id if first_command < len(events) else None
