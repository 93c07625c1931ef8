"""What the pages show, read from Temporal: the inbox across runs, the runs list, one run.

Visibility (our search attributes) finds the runs; each run's own `summary` query says
what it waits for. A summary is cached per run and history length: a run that waits adds
no event to its history, so an inbox of 200 waiting runs costs one visibility call and
no query once seen.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.client import Client, WorkflowExecution, WorkflowQueryFailedError
from temporalio.service import RPCError

from durable_agents.control.runs import WAITING_VALUES, WORKFLOW_TYPE, handle
from durable_agents.workflows import search_attributes as sa
from durable_agents.workflows.contracts import DelegatedBy
from durable_agents.workflows.records import ApprovalRequest, Question, RunStatus
from durable_agents.workflows.run_summary import RunSummary

QUERIES_AT_ONCE = 32
SUMMARIES_CACHED = 5000  # runs whose summaries are kept (the least recently seen go)
RUNS_LISTED = 100
INBOX_LIMIT = 500


@dataclass(frozen=True)
class RunRow:
    run_id: str
    status: str
    step: int | None
    waiting_for: str
    started_at: datetime
    summary: RunSummary | None  # None: no worker answered

    @property
    def agent(self) -> str:
        return (self.summary.agent or "") if self.summary else ""

    @property
    def cost_usd(self) -> float | None:
        return self.summary.usage.cost_usd if self.summary else None

    @property
    def delegated_by(self) -> DelegatedBy | None:
        """The run that handed this one its task (a sub-agent's run), if any."""
        return self.summary.delegated_by if self.summary else None


@dataclass(frozen=True)
class InboxEntry:
    run: RunRow
    approval: ApprovalRequest | None = None
    question: Question | None = None

    @property
    def asked_at(self) -> datetime:
        if self.approval is not None:
            return self.approval.requested_at
        assert self.question is not None
        return self.question.asked_at

    @property
    def deadline(self) -> datetime | None:
        return self.approval.deadline if self.approval else self.question.deadline  # type: ignore[union-attr]

    @property
    def tool(self) -> str:
        return self.approval.tool if self.approval else ""


class Views:
    """The runs of one deployment: those on the console's task queue (another app on the
    namespace has its own console; a run of ours whose worker is gone costs a timeout)."""

    def __init__(self, client: Client, task_queue: str) -> None:
        self.client = client
        self._ours = f"WorkflowType = '{WORKFLOW_TYPE}' AND TaskQueue = '{task_queue}'"
        self._summaries: OrderedDict[str, tuple[int, RunSummary]] = OrderedDict()
        self._gate = asyncio.Semaphore(QUERIES_AT_ONCE)

    async def summary(self, run_id: str, history_length: int | None = None) -> RunSummary | None:
        """The run's summary (cached while its history does not grow); None when no worker
        answers."""
        cached = self._summaries.get(run_id)
        if cached is not None and history_length is not None and cached[0] == history_length:
            self._summaries.move_to_end(run_id)
            return cached[1]
        async with self._gate:
            try:
                summary: RunSummary = await handle(self.client, run_id).query(
                    "summary", result_type=RunSummary, rpc_timeout=timedelta(seconds=5)
                )
            except (RPCError, WorkflowQueryFailedError):  # no worker, or it cannot replay it
                return None
        if history_length is not None:
            self._summaries[run_id] = (history_length, summary)
            self._summaries.move_to_end(run_id)
            while len(self._summaries) > SUMMARIES_CACHED:
                self._summaries.popitem(last=False)
        return summary

    async def _rows(self, query: str, limit: int) -> list[RunRow]:
        executions: list[WorkflowExecution] = []
        async for execution in self.client.list_workflows(query, limit=limit):
            executions.append(execution)
        summaries = await asyncio.gather(
            *(self.summary(e.id, e.history_length) for e in executions)
        )
        rows = []
        for execution, summary in zip(executions, summaries, strict=True):
            attributes = execution.typed_search_attributes
            status = attributes.get(sa.STATUS) or (
                execution.status.name.lower() if execution.status else ""
            )
            rows.append(
                RunRow(
                    run_id=execution.id,
                    status=summary.status.value if summary else status,
                    # The live step where a worker answered; the attribute has the step
                    # of the run's last change of status.
                    step=summary.current_step if summary else attributes.get(sa.STEP),
                    waiting_for=attributes.get(sa.WAITING_FOR) or "",
                    started_at=execution.start_time,
                    summary=summary,
                )
            )
        return rows

    async def inbox(self, agent: str = "", tool: str = "") -> list[InboxEntry]:
        """Every approval and question waiting, across runs, newest first."""
        waiting = ", ".join(f"'{v}'" for v in WAITING_VALUES if v != "resume")
        query = (
            f"{self._ours} AND ExecutionStatus = 'Running' AND {sa.WAITING_FOR.name} IN ({waiting})"
        )
        entries: list[InboxEntry] = []
        for row in await self._rows(query, INBOX_LIMIT):
            if row.summary is None or (agent and row.agent != agent):
                continue
            for approval in row.summary.pending_approvals:
                if not tool or approval.tool == tool:
                    entries.append(InboxEntry(row, approval=approval))
            if not tool:
                entries.extend(InboxEntry(row, question=q) for q in row.summary.pending_questions)
        return sorted(entries, key=lambda e: e.asked_at, reverse=True)

    async def runs(self, status: str = "", agent: str = "") -> list[RunRow]:
        query = self._ours
        if status:
            query += f" AND {sa.STATUS.name} = '{RunStatus(status).value}'"
        rows = await self._rows(query, RUNS_LISTED)
        return [r for r in rows if not agent or r.agent == agent]


def countdown(deadline: datetime | None, now: datetime | None = None) -> str:
    """'in 23h 59m' or 'passed': the deadline as a person reads it."""
    if deadline is None:
        return "no deadline"
    left = deadline - (now or datetime.now(UTC))
    seconds = int(left.total_seconds())
    if seconds <= 0:
        return "passed"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"in {days}d {hours}h"
    if hours:
        return f"in {hours}h {minutes}m"
    return f"in {minutes}m {rest % 60}s"
