"""The stores a worker needs, opened once from the settings: every store a run's or a
subject's data lands in (activities/pruning.py's ROWS_GO_WITH says how each table's rows
go)."""

from __future__ import annotations

from dataclasses import dataclass

from durable_agents.activities.ledger import EffectLedger
from durable_agents.activities.memory import MemoryStore
from durable_agents.activities.pruning import PrunedGuard
from durable_agents.activities.sql import PostgresDatabase, SqlDatabase, SqliteDatabase
from durable_agents.activities.store_queue import StoreIdentity
from durable_agents.activities.stream import DeltaStore
from durable_agents.activities.transcript import TranscriptStore
from durable_agents.activities.whatif_reports import WhatIfReports
from durable_agents.runtime.encryption import keyring_from
from durable_agents.runtime.settings import Settings


def open_database(settings: Settings) -> SqlDatabase:
    if settings.database_url:
        return PostgresDatabase(settings.database_url, settings.database_schema)
    return SqliteDatabase(settings.database_path)


@dataclass(frozen=True)
class Stores:
    db: SqlDatabase
    transcript: TranscriptStore
    ledger: EffectLedger
    live: DeltaStore
    memory: MemoryStore
    pruned: PrunedGuard
    reports: WhatIfReports
    # The store's own id: a worker with a store of its own polls a queue named after it.
    identity: StoreIdentity

    @classmethod
    def open(cls, settings: Settings) -> Stores:
        db = open_database(settings)
        keyring = keyring_from(settings)
        ledger = EffectLedger(db, keyring)
        return cls(
            db=db,
            transcript=TranscriptStore(db, keyring),
            ledger=ledger,
            live=DeltaStore(db, keyring),
            memory=MemoryStore(db, keyring),
            pruned=PrunedGuard(ledger),
            reports=WhatIfReports(db, keyring),
            identity=StoreIdentity(db),
        )
