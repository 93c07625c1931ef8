"""The `prune_stored_runs` activity: our stores must not grow for ever.

A run's data goes once Temporal says the run is closed and closed long enough ago, or
once Temporal no longer knows the run (its retention removed it) and our last write
for it is old enough. A run Temporal reports as running is never touched.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from datetime import UTC, datetime, timedelta
from typing import Literal

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.fingerprints import now_text
from durable_agents.activities.ledger import EffectLedger
from durable_agents.activities.memory import MemoryStore
from durable_agents.activities.sql import SqlDatabase, store_call
from durable_agents.activities.whatif_reports import WhatIfReports
from durable_agents.workflows.activity_io import PruneReport, PruneRequest
from durable_agents.workflows.records import IDENTITY_SEPARATOR

RowsGo = Literal["run", "memory", "report", "bookkeeping"]
# How the rows of each table of our stores go (activities/stores.py opens them all; a
# table made there and not named here fails tests/memory/test_store_doors.py):
# "run": a run's rows, under its identity (the live log, activities/stream.py, under its
#   workflow id): a prune deletes them with the run, a dry one counts them; forgetting a
#   subject deletes those of each closed run that used its memories (control/memory.py);
# "memory": a namespace's memories and the memory tools' receipts: forgotten with the
#   namespace, pruned past AGENT_MEMORY_RETENTION_DAYS (activities/memory.py);
# "report": what-if reports: pruned at the runs' age, forgotten when they name a run
#   that forgetting cleared;
# "bookkeeping": nobody's data (a pruned run's tombstone, nonces, schema versions, the
#   store's own id): kept.
ROWS_GO_WITH: dict[str, RowsGo] = {
    "transcript": "run",
    "model_calls": "run",
    "tool_lists": "run",
    "effects": "run",
    "stream_log": "run",
    # Which runs read a namespace: a pruned run holds no copy of it any more.
    "memory_readers": "run",
    "memories": "memory",
    "memory_terms": "memory",
    "memories_forgotten": "memory",
    "whatif_reports": "report",
    "pruned_runs": "bookkeeping",
    "signed_uses": "bookkeeping",
    "store_schemas": "bookkeeping",
    "store_identity": "bookkeeping",
}
TABLES = tuple(table for table, goes in ROWS_GO_WITH.items() if goes == "run")


def below_retention(older_than_seconds: float, retention_days: float) -> str | None:
    """Why a prune of this age deletes nothing, or None."""
    if older_than_seconds >= retention_days * 86400:
        return None
    return (
        f"nothing deleted: the age asked ({older_than_seconds:g} s) is below this "
        f"deployment's retention of {retention_days:g} days (AGENT_RETENTION_DAYS)"
    )


class PruneActivities:
    def __init__(
        self,
        client: Client,
        db: SqlDatabase,
        memory: MemoryStore | None = None,
        memory_retention_days: float | None = None,
        retention_days: float = 7.0,
    ) -> None:
        self.client = client
        # The youngest closed run whose data may go, whatever a prune request asks: the
        # workflow takes any age, and anyone who can start one could ask for 0.
        self.retention_days = retention_days
        self.db = db
        self.memory = memory
        self.memory_retention_days = memory_retention_days
        # What-if reports go at the same age as runs' rows (deleting needs no key).
        self.reports = WhatIfReports(db)

    @activity.defn(name="prune_stored_runs")
    async def prune_stored_runs(self, request: PruneRequest) -> PruneReport:
        report = PruneReport(dry_run=request.dry_run)
        report.refused = below_retention(request.older_than_seconds, self.retention_days)
        if report.refused is not None:
            activity.logger.warning("prune refused: %s", report.refused)
            return report
        cutoff = datetime.now(UTC) - timedelta(seconds=request.older_than_seconds)
        last_writes = await asyncio.to_thread(self._last_writes)
        for run_id, last_write in sorted(last_writes.items()):
            activity.heartbeat(run_id)
            verdict = await self._verdict(run_id, last_write, cutoff)
            if verdict == "open":
                report.kept_open += 1
            elif verdict == "recent":
                report.kept_recent += 1
            else:
                report.pruned.append(run_id)
                # A dry run counts what would go, as it does memories and reports.
                rows = count_run_rows if request.dry_run else delete_run_rows
                report.rows_deleted += await asyncio.to_thread(rows, self.db, run_id)
        if self.memory is not None and self.memory_retention_days is not None:
            kept_since = datetime.now(UTC) - timedelta(days=self.memory_retention_days)
            report.memories_deleted = await asyncio.to_thread(
                self.memory.prune, kept_since.isoformat(), request.dry_run
            )
        report.whatif_reports_deleted = await asyncio.to_thread(
            self.reports.prune, cutoff.isoformat(), request.dry_run
        )
        activity.logger.info("prune: %s", report)
        return report

    def _last_writes(self) -> dict[str, datetime]:
        found: dict[str, datetime] = {}
        for table in TABLES:
            for row in self.db.query(
                f"SELECT run_id, max(created_at) AS at FROM {table} GROUP BY run_id"
            ):
                at = datetime.fromisoformat(str(row["at"]))
                found[row["run_id"]] = max(at, found.get(row["run_id"], at))
        return found

    async def _verdict(self, store_key: str, last_write: datetime, cutoff: datetime) -> str:
        """A run's rows are kept under its identity (workflow id @ first run id): a workflow
        id reused by a newer chain does not make an older chain's data "open"."""
        workflow_id, _, first_run_id = store_key.partition(IDENTITY_SEPARATOR)
        forgotten = "old" if last_write < cutoff else "recent"
        try:
            description = await self.client.get_workflow_handle(workflow_id).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            return forgotten
        known_first = description.raw_description.workflow_execution_info.first_run_id
        if first_run_id and first_run_id != known_first:
            return forgotten  # Temporal knows only a later chain under this id
        if description.status == WorkflowExecutionStatus.RUNNING or description.close_time is None:
            return "open"
        return "old" if description.close_time < cutoff else "recent"


def count_run_rows(db: SqlDatabase, run_id: str) -> int:
    """How many rows a prune of this run would delete."""
    return sum(
        int(db.query(f"SELECT count(*) AS n FROM {table} WHERE run_id=?", (run_id,))[0]["n"])
        for table in TABLES
    )


def delete_run_rows(db: SqlDatabase, run_id: str) -> int:
    """Remove a closed run's stored rows and leave its tombstone, in one transaction:
    nothing acts for it again (PrunedGuard). How many rows went."""
    deleted = 0
    with db.transaction() as tx:
        tx.execute(
            "INSERT INTO pruned_runs (run_id, pruned_at) VALUES (?, ?)"
            " ON CONFLICT (run_id) DO NOTHING",
            (run_id, now_text()),
        )
        for table in TABLES:
            before = tx.execute(f"SELECT count(*) AS n FROM {table} WHERE run_id=?", (run_id,))
            tx.execute(f"DELETE FROM {table} WHERE run_id=?", (run_id,))
            deleted += int(before[0]["n"])
    return deleted


# Executions already found not pruned: a pruned run is closed, so an execution that was
# not pruned when it first acted never is while it runs (a rewind is a new execution).
KEPT_EXECUTIONS = 4096


class PrunedGuard:
    """Nothing acts again for a run whose stored data was pruned: its ledger went with it,
    so a rewind (Temporal's reset) or a fork of it would repeat its tools with nothing but
    the providers' own key dedupe to stop them. Asked once per execution."""

    def __init__(self, ledger: EffectLedger) -> None:
        self.ledger = ledger
        # (execution, the run it acted for): a fork's execution copies its parent's rows.
        self._clear: OrderedDict[tuple[str, str], None] = OrderedDict()

    async def refuse_pruned(self, run_id: str) -> None:
        execution = (activity.info().workflow_run_id or "", run_id)
        if execution[0] and execution in self._clear:
            return
        if await store_call(self.ledger.db, self.ledger.pruned, run_id):
            raise ApplicationError(
                f"refused: the stored data of run {run_id} was pruned, its effect ledger with "
                "it: nothing may act for it again (start a new run instead)",
                type="RunPruned",
                non_retryable=True,
            )
        self._clear[execution] = None
        if len(self._clear) > KEPT_EXECUTIONS:
            self._clear.popitem(last=False)
