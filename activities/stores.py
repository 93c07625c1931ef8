"""The stores a worker needs, opened once from the settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from activities.database import Database
from activities.demo_tools import DEMO_SCHEMA
from activities.ledger import EffectLedger
from activities.transcript import TranscriptStore


@dataclass(frozen=True)
class Stores:
    db: Database
    transcript: TranscriptStore
    ledger: EffectLedger

    @classmethod
    def open(cls, path: Path) -> Stores:
        db = Database(path, extra_schema=DEMO_SCHEMA)
        return cls(db=db, transcript=TranscriptStore(db), ledger=EffectLedger(db))
