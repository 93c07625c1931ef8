"""What the CLI reads from our own stores (ledger, transcript): only a store this machine
can reach. PostgreSQL is shared by every machine; a SQLite file is the worker's own, so a
verb that needs it says so instead of reading another disk's copy."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.ledger import EffectLedger
from durable_agents.activities.sql import StoreSchemaNewer, database_errors, redacted_url
from durable_agents.activities.stores import open_database
from durable_agents.activities.transcript import TranscriptStore
from durable_agents.control.runs import RunError
from durable_agents.runtime.encryption import keyring_from
from durable_agents.runtime.settings import Settings
from durable_agents.workflows import patches
from durable_agents.workflows.records import IDENTITY_SEPARATOR


def _local_note(settings: Settings) -> str:
    return (
        f"our stores are SQLite, local to the worker ({settings.database_path}); run this on "
        "the worker's machine with its AGENT_DATA_DIR, or give both AGENT_DATABASE_URL "
        "(PostgreSQL)"
    )


def check_reachable(settings: Settings) -> None:
    if settings.database_url is None and not settings.database_path.exists():
        raise RunError(f"no store here: {_local_note(settings)}")


@contextmanager
def store_errors(settings: Settings) -> Iterator[None]:
    """A database that is down, refuses us or is not ours: one line, not a traceback."""
    failures: tuple[type[Exception], ...] = (sqlite3.Error, OSError, *database_errors())
    try:
        yield
    except StoreSchemaNewer as err:
        raise RunError(str(err)) from None
    except failures as err:
        url = settings.database_url
        where = f"postgresql:{redacted_url(url)}" if url else "SQLite"
        reason = " ".join(str(err).split())[:200]
        raise RunError(f"cannot read our stores ({where}): {reason}") from None


def transcript_store(settings: Settings) -> TranscriptStore:
    check_reachable(settings)
    with store_errors(settings):
        return TranscriptStore(open_database(settings), keyring_from(settings))


def effect_ledger(settings: Settings) -> EffectLedger:
    check_reachable(settings)
    with store_errors(settings):
        return EffectLedger(open_database(settings), keyring_from(settings))


def read_messages(settings: Settings, store_key: str) -> list[dict[str, Any]]:
    """A run's conversation from our transcript store, as this machine can reach it."""
    store = transcript_store(settings)
    with store_errors(settings):
        return store.read(store_key)


# The run-identity marker is written in a run's first workflow task: far within this.
IDENTITY_MARKER_WITHIN_EVENTS = 50
# The markers of a run keyed by its identity: run-identity's own, or the one a new run
# opens with, which takes run-identity's new path among the opening's four.
IDENTITY_PATCHES = (patches.RUN_IDENTITY.encode(), patches.OPENING.encode())


async def store_key(client: Client, run_id: str) -> str:
    """Where a run's rows are: under its chain's identity when its first execution took the
    run-identity patch, else (a run started before identities) under its workflow id. Never
    under a bare id for a newer chain, which would show an older run's rows."""
    try:
        description = await client.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunError(f"no run with id {run_id}") from None
        raise RunError(f"cannot read run {run_id}: {err.message}") from None
    first = description.raw_description.workflow_execution_info.first_run_id or description.run_id
    first_execution = client.get_workflow_handle(run_id, run_id=first)
    seen = 0
    async for event in first_execution.fetch_history_events():
        marker = event.marker_recorded_event_attributes
        if event.HasField("marker_recorded_event_attributes") and (
            any(patch in marker.SerializeToString() for patch in IDENTITY_PATCHES)
        ):
            return f"{run_id}{IDENTITY_SEPARATOR}{first}"
        seen += 1
        if seen >= IDENTITY_MARKER_WITHIN_EVENTS:
            break
    return run_id


async def run_effects(client: Client, settings: Settings, run_id: str) -> list[dict[str, Any]]:
    """The effects our ledger recorded for a run: what the run really did."""
    key = await store_key(client, run_id)
    ledger = effect_ledger(settings)
    with store_errors(settings):
        found = ledger.effects(key)
        if found or settings.database_url is not None:
            return found
        started_here = bool(transcript_store(settings).read(key, 1))
    if not started_here:
        raise RunError(f"no effects of {run_id} in this machine's store; {_local_note(settings)}")
    return []  # the run is in this store and performed none
