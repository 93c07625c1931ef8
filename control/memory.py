"""Memories as people see and delete them (`agentctl memory`, the Python client): a
namespace's memories with who wrote them (run and step), one memory whole, and forgetting
a namespace or some of its memories, saying what was removed (a person's right to
deletion). Read where this machine reaches the stores, as control/stored.py says."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.memory import MemoryRecord, MemoryStore
from durable_agents.activities.pruning import delete_run_rows
from durable_agents.activities.sql import SqlDatabase
from durable_agents.activities.stores import open_database
from durable_agents.activities.whatif_reports import WhatIfReports
from durable_agents.control.runs import RunError
from durable_agents.control.stored import check_reachable, store_errors
from durable_agents.runtime.encryption import keyring_from
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.records import IDENTITY_SEPARATOR


def memory_store(settings: Settings) -> MemoryStore:
    check_reachable(settings)
    with store_errors(settings):
        return MemoryStore(open_database(settings), keyring_from(settings))


def namespaces(settings: Settings) -> dict[str, int]:
    store = memory_store(settings)
    with store_errors(settings):
        return store.namespaces()


def listing(settings: Settings, namespace: str, limit: int = 100) -> list[MemoryRecord]:
    store = memory_store(settings)
    with store_errors(settings):
        return store.listing(namespace, limit)


def one(settings: Settings, namespace: str, memory_id: str) -> MemoryRecord:
    store = memory_store(settings)
    with store_errors(settings):
        found = store.one(namespace, memory_id)
    if found is None:
        raise RunError(f"no memory {memory_id} in {namespace}")
    return found


# What forgetting a subject leaves, said wherever it is done (CLI, console, client).
WHAT_STAYS = (
    "Temporal's history of each run keeps what the run saw (sealed when "
    "AGENT_ENCRYPTION_KEYS are set) until Temporal's retention removes it; runs still open "
    "keep their copies until they close and are forgotten again or pruned; so do runs that "
    "never used the memory tools themselves (a fork's copied transcript, a parent holding "
    "a sub-agent's answer, runs from before this release)"
)


@dataclass(frozen=True)
class ForgetReport:
    """What forgetting a subject removed, and what it could not."""

    memories: list[str]  # the memory ids removed
    runs_cleared: list[str]  # closed runs whose stored copies went (transcript, live log)
    # Runs still open (their copies stay until they close), or that this namespace of
    # Temporal does not know (kept: the daily prune removes those its retention forgot).
    runs_open: list[str]
    whatif_reports: list[str]  # what-if reports that named a cleared run
    stays: str = WHAT_STAYS

    def said(self, namespace: str) -> str:
        text = (
            f"forgot {len(self.memories)} memories of {namespace}; cleared the stored "
            f"transcripts and live logs of {len(self.runs_cleared)} closed runs that used "
            f"them and {len(self.whatif_reports)} what-if reports naming those runs"
        )
        if self.runs_open:
            kept = ", ".join(self.runs_open)
            text += f"; {len(self.runs_open)} runs open or unknown here keep theirs ({kept})"
        return f"{text}. What stays: {self.stays}."


async def forget_subject(client: Client, settings: Settings, namespace: str) -> ForgetReport:
    """Forget every memory of a namespace and every copy kept outside Temporal: the stored
    rows of each closed run that used them (transcript, model calls, live log; the run is
    then pruned: nothing acts for it again) and the what-if reports naming those runs.
    Runs still open keep theirs (their next step needs them), and are reported. Our runs'
    memo holds no memory (only a fork's parent and moment)."""
    store = memory_store(settings)
    with store_errors(settings):
        readers = await asyncio.to_thread(store.readers, namespace)
    # Temporal is asked about every run first: when it cannot answer, nothing is removed.
    verdicts = {store_key: await _verdict(client, store_key) for store_key in readers}
    kept = [key for key, verdict in verdicts.items() if verdict in ("open", "unknown")]
    cleared = [key for key in readers if key not in kept]
    with store_errors(settings):
        gone = await asyncio.to_thread(store.forget, namespace, None)
        for store_key in cleared:
            closed = verdicts[store_key] == "closed"
            await asyncio.to_thread(_clear_run, store.db, store_key, closed)
        workflow_ids = [key.partition(IDENTITY_SEPARATOR)[0] for key in cleared]
        sealed = WhatIfReports(store.db, keyring_from(settings))  # reports are sealed rows
        reports = await asyncio.to_thread(sealed.delete_mentioning, workflow_ids)
        await asyncio.to_thread(store.drop_readers, namespace, cleared)
    return ForgetReport(gone, cleared, kept, reports)


def _clear_run(db: SqlDatabase, store_key: str, with_live_log: bool) -> None:
    """A closed run's stored rows, tombstoned as a prune leaves them. Its live log is kept
    under the bare workflow id: cleared too, unless a later chain now holds that id."""
    delete_run_rows(db, store_key)
    workflow_id = store_key.partition(IDENTITY_SEPARATOR)[0]
    if with_live_log and workflow_id != store_key:
        delete_run_rows(db, workflow_id)


async def _verdict(client: Client, store_key: str) -> str:
    """This run (this very chain: its identity's first run) as Temporal knows it: "open",
    "closed", "superseded" (closed, and a later chain holds its id) or "unknown" (not in
    this namespace: kept, rather than deleting what another namespace's run still needs;
    the daily prune removes a run Temporal's retention forgot)."""
    workflow_id, _, first_run_id = store_key.partition(IDENTITY_SEPARATOR)
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return "unknown"
        raise RunError(f"cannot ask Temporal about run {workflow_id}: {err.message}") from None
    if first_run_id and described.raw_description.workflow_execution_info.first_run_id != (
        first_run_id
    ):
        return "superseded"
    return "open" if described.status == WorkflowExecutionStatus.RUNNING else "closed"


def forget(settings: Settings, namespace: str, memory_ids: list[str] | None = None) -> list[str]:
    """Remove a namespace's memories (all, or those named); the ids removed."""
    store = memory_store(settings)
    with store_errors(settings):
        if memory_ids is not None:  # every id checked first: a typo removes nothing
            missing = sorted(i for i in set(memory_ids) if store.one(namespace, i) is None)
            if missing:
                raise RunError(f"no memory {', '.join(missing)} in {namespace}; none removed")
        return store.forget(namespace, memory_ids)
