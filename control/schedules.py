"""Scheduled agents: a Temporal Schedule per name, each of its starts a normal run of the
agent with its own id (the name and the scheduled time). `agentctl schedule ...` and
`AgentClient.create_schedule` call these; the Web UI's Schedules page shows them."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any, Literal

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.control.runs import RunError, with_subject_grant
from durable_agents.runtime.settings import Settings
from durable_agents.workflows import search_attributes as sa
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.records import RunStatus
from durable_agents.workflows.subject_grants import SCHEDULE_PREFIX

# A run id is the name and the scheduled time (`-2026-12-03T09:00:00Z`, 21 characters).
SCHEDULE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
MEMO_KEY = "durable_agents"
Overlap = Literal["skip", "buffer_one", "allow_all", "cancel_other"]
OVERLAPS: dict[str, ScheduleOverlapPolicy] = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
    "cancel_other": ScheduleOverlapPolicy.CANCEL_OTHER,
}


@dataclass
class ScheduleInfo:
    """A scheduled agent as `schedule list` shows it."""

    name: str
    agent: str
    goal: str
    cron: list[str]
    every_seconds: list[float]
    paused: bool
    note: str
    next_runs: list[str] = field(default_factory=list)
    recent_runs: list[str] = field(default_factory=list)
    started: int = 0
    skipped_overlapping: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_name(name: str) -> str:
    if not re.fullmatch(SCHEDULE_NAME, name):
        raise RunError(
            f"bad schedule name {name!r}: 1-100 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


async def create(
    client: Client,
    settings: Settings,
    name: str,
    request: RunRequest,
    *,
    cron: list[str] | None = None,
    every: timedelta | None = None,
    overlap: Overlap = "skip",
) -> ScheduleInfo:
    """A Schedule that starts a run of `request` at each cron time (or interval). With the
    default overlap "skip", a time that comes while the previous run still runs is skipped."""
    check_name(name)
    if not cron and every is None:
        raise RunError("give --cron (e.g. '0 9 * * MON-FRI') or --every")
    if every is not None and every < timedelta(seconds=1):
        raise RunError("--every must be at least 1s")
    if request.agent is None:
        raise RunError("a schedule names its agent (--agent)")
    request = with_subject_grant(settings, request, SCHEDULE_PREFIX + name)
    action = ScheduleActionStartWorkflow(
        AgentWorkflow.run,
        request,
        id=name,
        task_queue=settings.task_queue,
        static_summary=preview(request.goal, 120),
        typed_search_attributes=TypedSearchAttributes(
            [SearchAttributePair(sa.STATUS, RunStatus.PLANNING.value)]
        ),
    )
    spec = ScheduleSpec(
        cron_expressions=list(cron or []),
        intervals=[ScheduleIntervalSpec(every=every)] if every is not None else [],
    )
    schedule = Schedule(action=action, spec=spec, policy=SchedulePolicy(overlap=OVERLAPS[overlap]))
    # Temporal keeps a cron as calendars: the text people wrote is kept beside it.
    about = {"agent": request.agent, "goal": preview(request.goal, 300), "cron": cron or []}
    memo = {MEMO_KEY: about}
    try:
        await client.create_schedule(name, schedule, memo=memo)
    except ScheduleAlreadyRunningError:
        raise RunError(f"schedule {name!r} already exists; delete it first") from None
    except RPCError as err:
        raise RunError(f"Temporal refused schedule {name!r}: {err.message}") from None
    return await describe(client, name)


async def list_all(client: Client) -> list[ScheduleInfo]:
    """Every schedule that starts agent runs (not our housekeeping ones)."""
    found = []
    async for listed in await client.list_schedules():
        action = listed.schedule.action if listed.schedule else None
        if getattr(action, "workflow", None) != AgentWorkflow.__name__:
            continue
        found.append(await describe(client, listed.id))
    return sorted(found, key=lambda s: s.name)


async def describe(client: Client, name: str) -> ScheduleInfo:
    description = await _call(name, _handle(client, name).describe())
    schedule, info = description.schedule, description.info
    memo = (await description.memo()).get(MEMO_KEY, {}) or {}
    return ScheduleInfo(
        name=name,
        agent=str(memo.get("agent", "")),
        goal=str(memo.get("goal", "")),
        cron=list(memo.get("cron") or schedule.spec.cron_expressions),
        every_seconds=[i.every.total_seconds() for i in schedule.spec.intervals],
        paused=schedule.state.paused,
        note=schedule.state.note or "",
        next_runs=[t.isoformat() for t in info.next_action_times[:3]],
        recent_runs=[
            a.action.workflow_id
            for a in info.recent_actions[-5:]
            if hasattr(a.action, "workflow_id")
        ],
        started=info.num_actions,
        skipped_overlapping=info.num_actions_skipped_overlap,
    )


async def pause(client: Client, name: str, note: str = "") -> None:
    await _call(name, _handle(client, name).pause(note=note or "paused with agentctl"))


async def unpause(client: Client, name: str, note: str = "") -> None:
    await _call(name, _handle(client, name).unpause(note=note or "unpaused with agentctl"))


async def delete(client: Client, name: str) -> None:
    """No run starts from it any more; runs it started go on."""
    await _call(name, _handle(client, name).delete())


async def trigger(client: Client, name: str) -> None:
    """Start a run now (the overlap policy still applies)."""
    await _call(name, _handle(client, name).trigger())


def _handle(client: Client, name: str) -> ScheduleHandle:
    return client.get_schedule_handle(check_name(name))


async def _call(name: str, work: Any) -> Any:
    try:
        return await work
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunError(f"no schedule named {name!r}") from None
        raise RunError(f"Temporal refused: {err.message}") from None
