"""Releases: which build of the worker deployment takes new runs, and when.

A new build takes new runs only after the histories it may meet replay on its code (the
code installed where the check runs): every open run, and a sample of recent closed ones
of each agent (time travel and forks replay those). Runs stay pinned to the build that
started them; one moves only when its own history replays on the build it moves to.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from google.protobuf.field_mask_pb2 import FieldMask
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.deployment.v1 import WorkerDeploymentVersion as VersionProto
from temporalio.api.enums.v1 import WorkerDeploymentVersionStatus
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflow.v1 import VersioningOverride, WorkflowExecutionOptions
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    UpdateWorkflowExecutionOptionsRequest,
)
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
)
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.service import RPCError, RPCStatusCode
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from durable_agents.control import timeline
from durable_agents.control.runs import RunError, started_request
from durable_agents.control.timeline import CODE_HERE, ReplayOutcome, Verdict
from durable_agents.runtime import versioning
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.agent import AgentWorkflow

# Temporal's own search attribute: "deployment:build" of the build a run is pinned to.
PINNED_TO = SearchAttributeKey.for_keyword("TemporalWorkerDeploymentVersion")
# How many closed runs of each agent the check replays, among how many of the latest.
CLOSED_PER_AGENT = 3
CLOSED_SCANNED = 100
FETCH_AT_ONCE = 8
T = TypeVar("T")


class ReleaseError(RunError):
    """A release step refused: one line saying why, nothing changed."""


@dataclass(frozen=True)
class RunCheck:
    """One run's history replayed on the code here."""

    run_id: str
    temporal_run: str
    is_open: bool
    build: str  # the build it is pinned to; "" when it is not pinned
    agent: str
    verdict: Verdict

    @property
    def where(self) -> str:
        if self.verdict.ok:
            return ""
        named = f" ({self.verdict.event_type})" if self.verdict.event_type else ""
        return f"event {self.verdict.event_id}{named}" if self.verdict.event_id else "?"


@dataclass(frozen=True)
class CheckReport:
    build: str  # the code the histories were replayed on
    runs: list[RunCheck] = field(default_factory=list)

    @property
    def diverging(self) -> list[RunCheck]:
        return [run for run in self.runs if not run.verdict.ok]

    @property
    def ok(self) -> bool:
        return not self.diverging


def build_of(settings: Settings, described: WorkflowExecutionDescription) -> str:
    """The build a run is pinned to now: a move's override first (the run's own version
    changes only at its next workflow task), else the build that last ran it."""
    info = described.raw_description.workflow_execution_info.versioning_info
    override = info.versioning_override.pinned.version
    version = override if override.build_id else info.deployment_version
    return version.build_id if version.deployment_name == settings.deployment_name else ""


def pinned_build(settings: Settings, pinned_to: str | None) -> str:
    """The build of "deployment:build" when it is this deployment's, else ""."""
    deployment, _, build = (pinned_to or "").partition(":")
    return build if deployment == settings.deployment_name else ""


async def _agent_runs(
    client: Client, settings: Settings, *, is_open: bool, limit: int | None = None
) -> AsyncIterator[tuple[str, str, str]]:
    """(run id, Temporal run id, pinned build) of the agent runs on our task queue."""
    status = "=" if is_open else "!="
    query = (
        f"WorkflowType = '{AgentWorkflow.__name__}' AND TaskQueue = '{settings.task_queue}' "
        f"AND ExecutionStatus {status} 'Running'"
    )
    async for execution in client.list_workflows(query, limit=limit):
        pinned = execution.typed_search_attributes.get(PINNED_TO)
        yield execution.id, execution.run_id or "", pinned_build(settings, pinned)


async def _agent_of(client: Client, first_event: HistoryEvent) -> str:
    request = await started_request(client.data_converter, first_event)
    if request is None:
        return "?"
    return request.agent or "(before agents)"


async def _first_event_agent(client: Client, run_id: str, temporal_run: str) -> str:
    handle = client.get_workflow_handle(run_id, run_id=temporal_run)
    async for event in handle.fetch_history_events(page_size=1):
        return await _agent_of(client, event)
    return "?"


async def check_runs(
    client: Client,
    settings: Settings,
    *,
    per_agent: int = CLOSED_PER_AGENT,
    workflows: Sequence[type] = CODE_HERE,
    progress: Callable[[RunCheck, int], None] | None = None,
) -> CheckReport:
    """Replay every open agent run and the latest `per_agent` closed runs of each agent
    (among the latest CLOSED_SCANNED) on `workflows`, the code here by default.
    `progress(run, total)` hears each run as it is checked."""
    chosen: list[tuple[str, str, str, bool]] = [
        (rid, trun, build, True)
        async for rid, trun, build in _agent_runs(client, settings, is_open=True)
    ]
    taken: dict[str, int] = {}
    closed = (  # none wanted: none listed, none read
        [
            found
            async for found in _agent_runs(client, settings, is_open=False, limit=CLOSED_SCANNED)
        ]
        if per_agent
        else []
    )
    agents = await _gather(
        [_first_event_agent(client, rid, trun) for rid, trun, _ in closed], FETCH_AT_ONCE
    )
    for (rid, trun, build), agent in zip(closed, agents, strict=True):
        if taken.get(agent, 0) < per_agent:
            taken[agent] = taken.get(agent, 0) + 1
            chosen.append((rid, trun, build, False))
    report = CheckReport(build=versioning.build_id(settings))
    total = len(chosen)
    for start in range(0, total, FETCH_AT_ONCE):
        batch = chosen[start : start + FETCH_AT_ONCE]
        histories = await _gather(
            [
                client.get_workflow_handle(rid, run_id=trun or None).fetch_history()
                for rid, trun, _, _ in batch
            ],
            FETCH_AT_ONCE,
        )
        for (rid, trun, build, is_open), history in zip(batch, histories, strict=True):
            verdict = await timeline.replay_history(history, client.data_converter, workflows)
            agent = await _agent_of(client, history.events[0])
            checked = RunCheck(rid, trun, is_open, build, agent, verdict)
            report.runs.append(checked)
            if progress is not None:
                progress(checked, total)
    return report


async def _gather(coroutines: Sequence[Awaitable[T]], limit: int) -> list[T]:
    """All of them, at most `limit` at a time, in order."""
    gate = asyncio.Semaphore(limit)

    async def one(coroutine: Awaitable[T]) -> T:
        async with gate:
            return await coroutine

    return list(await asyncio.gather(*(one(c) for c in coroutines)))


def history_files(paths: Sequence[Path]) -> list[Path]:
    """Files as given; a directory: its *.json files that hold a history (an "events"
    list), so a fixtures directory with its manifest checks as it is."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += [p for p in sorted(path.glob("*.json")) if _holds_history(p)]
        else:
            found.append(path)
    return found


def _holds_history(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return b'"events"' in file.read(4096)  # a history's first key; not the whole file
    except OSError:
        return False


async def check_files(
    paths: Sequence[Path],
    converter: DataConverter = pydantic_data_converter,
    workflows: Sequence[type] = CODE_HERE,
) -> list[ReplayOutcome]:
    """Exported histories (a CI gate: no server needed) replayed on `workflows`."""
    files = history_files(paths)
    if not files:
        raise ReleaseError('no history files there (JSON files with an "events" list)')
    return await timeline.replay_files(files, converter, workflows)


@dataclass(frozen=True)
class BuildStatus:
    build: str
    state: str  # Temporal's: current, ramping, draining, drained, inactive
    open_runs: int  # agent runs pinned to it and still open
    here: bool  # the code installed here is this build

    @property
    def retirable(self) -> bool:
        """No new run goes there and no open run is pinned there: its workers may stop."""
        return self.state not in ("current", "ramping") and self.open_runs == 0


@dataclass(frozen=True)
class ReleaseStatus:
    deployment: str
    current: str | None
    builds: list[BuildStatus]
    unpinned_open_runs: int  # open agent runs pinned nowhere (started before versioning)


# What a busy server answers now and not a moment later: asked again, a few times.
TRANSIENT = (RPCStatusCode.CANCELLED, RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)


async def _versions(client: Client, deployment: str) -> dict[str, str]:
    """Each build of the deployment and its state, oldest first; {} if there is none."""
    request = DescribeWorkerDeploymentRequest(
        namespace=client.namespace, deployment_name=deployment
    )
    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(lambda e: isinstance(e, RPCError) and e.status in TRANSIENT),
            stop=stop_after_attempt(5),
            wait=wait_exponential(multiplier=0.2, max=2),
            reraise=True,
        ):
            with attempt:
                described = await client.workflow_service.describe_worker_deployment(request)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return {}
        raise versioning.unavailable(err) from err
    summaries = sorted(
        described.worker_deployment_info.version_summaries,
        key=lambda v: v.create_time.ToDatetime(),
    )
    return {v.deployment_version.build_id: _state(v.status) for v in summaries}


def _state(status: int) -> str:
    name = WorkerDeploymentVersionStatus.Name(status)  # type: ignore[arg-type]
    return name.removeprefix("WORKER_DEPLOYMENT_VERSION_STATUS_").lower()


async def _open_runs(client: Client, settings: Settings, pinned: str | None) -> int:
    query = (
        f"WorkflowType = '{AgentWorkflow.__name__}' AND TaskQueue = '{settings.task_queue}' "
        "AND ExecutionStatus = 'Running' AND "
    )
    if pinned is None:
        query += f"{PINNED_TO.name} IS NULL"
    else:
        query += f"{PINNED_TO.name} = '{settings.deployment_name}:{pinned}'"
    return (await client.count_workflows(query)).count


def _versioned(settings: Settings) -> None:
    if not settings.worker_versioning:
        raise ReleaseError(
            "worker versioning is off (AGENT_WORKER_VERSIONING=false): there are no builds; "
            "`agentctl release check` still replays the runs on the code here"
        )


async def status(client: Client, settings: Settings) -> ReleaseStatus:
    """The deployment's builds: which takes new runs, how many open runs each holds, which
    may be retired."""
    _versioned(settings)
    deployment = settings.deployment_name
    versions = await _versions(client, deployment)
    counts = await asyncio.gather(*(_open_runs(client, settings, b) for b in versions))
    here = versioning.build_id(settings)
    builds = [
        BuildStatus(build, state, count, build == here)
        for (build, state), count in zip(versions.items(), counts, strict=True)
    ]
    current = next((b.build for b in builds if b.state == "current"), None)
    return ReleaseStatus(deployment, current, builds, await _open_runs(client, settings, None))


def _code_here_is(settings: Settings, build: str, doing: str) -> None:
    here = versioning.build_id(settings)
    if here != build:
        raise ReleaseError(
            f"the code installed here is build {here}, not {build}: {doing} replays histories "
            f"on the code here, so run it where build {build} is installed"
        )


async def _known_build(client: Client, settings: Settings, build: str) -> dict[str, str]:
    versions = await _versions(client, settings.deployment_name)
    if build not in versions:
        known = ", ".join(versions) or "none yet"
        raise ReleaseError(
            f"no worker of build {build} has polled deployment {settings.deployment_name} "
            f"(its builds: {known}); start that build's workers first"
        )
    return versions


async def promote(
    client: Client,
    settings: Settings,
    build: str,
    *,
    force: bool = False,
    by: str = "agentctl",
    workflows: Sequence[type] = CODE_HERE,
    progress: Callable[[RunCheck, int], None] | None = None,
) -> CheckReport | None:
    """Make `build` current (new runs start on it) after a passing check on the code here,
    which must be that build; `force` skips the check. Returns the check (None if forced);
    ReleaseRefused when a run would diverge."""
    _versioned(settings)
    versions = await _known_build(client, settings, build)
    if versions[build] == "current":
        raise ReleaseError(f"build {build} is already current")
    report = None
    if not force:
        _code_here_is(settings, build, "promote")
        report = await check_runs(client, settings, workflows=workflows, progress=progress)
        if not report.ok:
            raise ReleaseRefused(report)
    try:
        await versioning.set_current(client, settings.deployment_name, build, by=by)
    except RPCError as err:
        raise ReleaseError(f"Temporal refused to make {build} current: {err.message}") from None
    return report


class ReleaseRefused(ReleaseError):
    """The check found runs that would diverge on the build."""

    def __init__(self, report: CheckReport) -> None:
        self.report = report
        count = len(report.diverging)
        super().__init__(
            f"{count} run{'s' if count != 1 else ''} would diverge on build {report.build}: "
            "not promoted (put the change behind workflow.patched, or --force)"
        )


async def move(
    client: Client,
    settings: Settings,
    run_id: str,
    to_build: str,
    *,
    by: str = "agentctl",
    workflows: Sequence[type] = CODE_HERE,
) -> RunCheck:
    """Pin an open run to another build, only when its history replays on that build's
    code (the code here, which must be that build)."""
    _versioned(settings)
    handle = client.get_workflow_handle(run_id)
    try:
        described = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise ReleaseError(f"no run with id {run_id}") from None
        raise
    if described.status != WorkflowExecutionStatus.RUNNING:
        state = described.status.name.lower() if described.status else "closed"
        raise ReleaseError(f"run {run_id} is {state}: only an open run can move")
    now = build_of(settings, described)
    if now == to_build:
        raise ReleaseError(f"run {run_id} is already on build {to_build}")
    await _known_build(client, settings, to_build)
    _code_here_is(settings, to_build, "move")
    history = await handle.fetch_history()
    verdict = await timeline.replay_history(history, client.data_converter, workflows)
    checked = RunCheck(
        run_id, described.run_id, True, now, await _agent_of(client, history.events[0]), verdict
    )
    if not verdict.ok:
        raise ReleaseError(
            f"run {run_id} would diverge on build {to_build} at {checked.where}: "
            f"{verdict.message}; it stays on {now or 'its build'}"
        )
    version = VersionProto(deployment_name=settings.deployment_name, build_id=to_build)
    pinned = VersioningOverride.PinnedOverride(
        version=version,
        behavior=VersioningOverride.PinnedOverrideBehavior.PINNED_OVERRIDE_BEHAVIOR_PINNED,
    )
    await client.workflow_service.update_workflow_execution_options(
        UpdateWorkflowExecutionOptionsRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=run_id),
            workflow_execution_options=WorkflowExecutionOptions(
                versioning_override=VersioningOverride(pinned=pinned)
            ),
            update_mask=FieldMask(paths=["versioning_override"]),
            identity=by,
        )
    )
    return checked


# How long `agentctl up` waits for its new worker's first poll before it gives up on
# releasing the build (Temporal learns of a build only from its workers' polls).
FIRST_POLL_SECONDS = 60.0


async def adopt_local_build(
    client: Client,
    settings: Settings,
    say: Callable[[str], None],
    *,
    first_poll_within: float = FIRST_POLL_SECONDS,
) -> None:
    """For the local stack (`agentctl up`, `demo`), which runs one worker, of the code here:
    when the code changed since the current build, release it as an operator would (check,
    promote) and move the open runs of older builds to it, each after its history replayed
    on it; nobody else will serve them. It first waits, within a bound, for the new
    worker's first poll: runs are never moved to a build no worker serves. A failing
    check changes nothing and says why."""
    if not settings.worker_versioning:
        return
    here = versioning.build_id(settings)
    current = await versioning.current_build(client, settings.deployment_name)
    if current in (None, here):
        say(f"worker: build {here} of deployment {settings.deployment_name} takes new runs")
        return
    if not await _first_poll(client, settings, here, first_poll_within, say):
        say(
            f"worker: build {here} NOT released: no worker of it polled within "
            f"{first_poll_within:g} s; new runs still start on {current} (run `agentctl up` "
            "again once the worker is up)"
        )
        return
    try:
        report = await promote(client, settings, here, by="agentctl up")
    except ReleaseRefused as refused:
        names = ", ".join(f"{r.run_id} at {r.where}" for r in refused.report.diverging[:5])
        say(
            f"worker: build {here} NOT released: {refused} ({names}); new runs still start on "
            f"{current}, which no worker here serves (docs/changing-workflows.md, deploying)"
        )
        return
    except ReleaseError as err:
        say(f"worker: build {here} not released: {err}")
        return
    moved = 0
    for run in [] if report is None else report.runs:
        if run.is_open and run.build != here:
            await move(client, settings, run.run_id, here, by="agentctl up")
            moved += 1
    say(
        f"worker: build {here} released (was {current}): every open and recent run replays "
        f"on it; moved {moved} open runs to it"
    )


async def _first_poll(
    client: Client, settings: Settings, build: str, within: float, say: Callable[[str], None]
) -> bool:
    """Whether Temporal has seen `build` poll the deployment, waiting up to `within`
    seconds for it (said once when it has to wait)."""
    deadline = time.monotonic() + within
    told = False
    while build not in await _versions(client, settings.deployment_name):
        if time.monotonic() >= deadline:
            return False
        if not told:
            say(f"worker: waiting for build {build}'s first poll (at most {within:g} s)")
            told = True
        await asyncio.sleep(0.25)
    return True
