"""A run never proceeds on a store that does not hold it (docs/architecture.md, "Replicas
and the stores").

A run's past lives outside Temporal's history, in our stores (its transcript, model memo,
ledger rows); each activity that acts on that past carries what the workflow knows it
wrote there: `rows_written`, how many transcript rows the run wrote before this call.
A worker whose store holds fewer (a replica with a store of its own: the default SQLite
file under its data dir) refuses the call with a retryable `StoreMissingRecords` that
names its store and the setting to share, before the model or any tool is called, so
nothing answers from half a past and no effect is made twice. The workflow waits for a
worker whose store does hold the run (workflows/phases/activity_call.py).
"""

from __future__ import annotations

from typing import Protocol

from temporalio.exceptions import ApplicationError

from durable_agents.activities.sql import PostgresDatabase, SqlDatabase, store_call

# The error's type: retried by Temporal, waited out by the workflow (never a failure).
from durable_agents.workflows.activity_io import STORE_MISSING

__all__ = ["STORE_MISSING", "CountsRows", "check_holds", "missing_records", "refuse_unless_held"]


class CountsRows(Protocol):
    """What the check reads of a transcript store (activities/transcript.TranscriptStore),
    which itself refuses a fork's copy through `missing_records`: a protocol, so the two
    modules do not import each other."""

    def rows_before(self, run_id: str, before_seq: int) -> int: ...


def store_named(db: SqlDatabase) -> str:
    """The store as an operator finds it: its kind and place, never a password."""
    if isinstance(db, PostgresDatabase) and db.schema:
        return f"{db.where} (schema {db.schema})"
    return db.where


def sharing_fix(db: SqlDatabase) -> str:
    """What makes every replica see one store, in the settings' own names."""
    if db.local:
        return (
            "Replicas must share one store: set AGENT_DATABASE_URL=postgresql://... on every "
            "replica (a SQLite file under AGENT_DATA_DIR is one machine's)"
        )
    return (
        "Replicas must share one store: give every replica the same AGENT_DATABASE_URL "
        "(and AGENT_DATABASE_SCHEMA)"
    )


def missing_records(
    db: SqlDatabase, run_id: str, found: int, written: int, before_seq: int | None = None
) -> ApplicationError:
    """The refusal, in one line: which store, what it lacks, what to set."""
    before = f" before seq {before_seq}" if before_seq is not None else ""
    return ApplicationError(
        f"this worker's store ({store_named(db)}) does not hold run {run_id}: {found} of "
        f"its {written} transcript rows{before} are there; the run waits for a worker whose "
        f"store holds them. {sharing_fix(db)}",
        type=STORE_MISSING,
    )


def check_holds(
    db: SqlDatabase, transcript: CountsRows, run_id: str, before_seq: int, written: int | None
) -> None:
    """Raise StoreMissingRecords unless the store holds at least `written` of the run's
    transcript rows before `before_seq` (None: a call from a run that kept no count)."""
    if written is None or written <= 0:
        return
    found = transcript.rows_before(run_id, before_seq)
    if found < written:
        raise missing_records(db, run_id, found, written, before_seq)


async def refuse_unless_held(
    db: SqlDatabase, transcript: CountsRows, run_id: str, before_seq: int, written: int | None
) -> None:
    """`check_holds` from an activity (off the event loop on a database server)."""
    if written is None or written <= 0:
        return
    await store_call(db, check_holds, db, transcript, run_id, before_seq, written)
