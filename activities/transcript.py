"""The conversation, keyed by (run id, sequence number), and the model-call memo.

The workflow only ever holds sequence numbers and previews; whole messages live here.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from temporalio import activity

from activities.sql import SqlDatabase, Tx, apply_schema
from workflows.contracts import TranscriptCopy

SCHEMA = """
CREATE TABLE IF NOT EXISTS transcript (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS model_calls (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    response TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (run_id, seq, fingerprint)
)
"""


def now_text() -> str:
    return datetime.now(UTC).isoformat()


class TranscriptStore:
    def __init__(self, db: SqlDatabase) -> None:
        self.db = db
        apply_schema(db, SCHEMA)

    def put(self, run_id: str, seq: int, message: dict[str, Any]) -> None:
        """Write the message at its sequence number. The workflow decides what goes at each
        seq, so a rewrite (a retry, or a reset's new branch) replaces the old row."""
        with self.db.transaction() as tx:
            _upsert(tx, run_id, seq, message)

    def put_many(self, run_id: str, messages: list[tuple[int, dict[str, Any]]]) -> None:
        """Several messages in one transaction (a model call's appended instructions)."""
        if not messages:
            return
        with self.db.transaction() as tx:
            for seq, message in messages:
                _upsert(tx, run_id, seq, message)

    def read(self, run_id: str, before_seq: int | None = None) -> list[dict[str, Any]]:
        sql = "SELECT message FROM transcript WHERE run_id = ?"
        params: list[Any] = [run_id]
        if before_seq is not None:
            sql += " AND seq < ?"
            params.append(before_seq)
        rows = self.db.query(sql + " ORDER BY seq", params)
        return [json.loads(row["message"]) for row in rows]

    def read_window(self, run_id: str, from_seq: int, before_seq: int) -> list[dict[str, Any]]:
        """The goal (seq 0) and the messages from `from_seq`: what a step-scoped model sees.
        Reads only those rows, so a call costs the same at step 10 and at step 2,000."""
        rows = self.db.query(
            "SELECT message FROM transcript WHERE run_id = ? AND (seq = 0 OR seq >= ?)"
            " AND seq < ? ORDER BY seq",
            (run_id, from_seq, before_seq),
        )
        return [json.loads(row["message"]) for row in rows]

    def recall(self, run_id: str, seq: int, fingerprint: str) -> dict[str, Any] | None:
        """The stored answer to exactly this request at this point of the run, if any."""
        rows = self.db.query(
            "SELECT response FROM model_calls WHERE run_id=? AND seq=? AND fingerprint=?",
            (run_id, seq, fingerprint),
        )
        return json.loads(rows[0]["response"]) if rows else None

    def remember(
        self,
        run_id: str,
        seq: int,
        fingerprint: str,
        response: dict[str, Any],
        message: dict[str, Any],
    ) -> None:
        """Store the model's answer and its transcript message in one transaction."""
        with self.db.transaction() as tx:
            tx.execute(
                "INSERT INTO model_calls (run_id, seq, fingerprint, response, created_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, seq, fingerprint) DO NOTHING",
                (run_id, seq, fingerprint, json.dumps(response), now_text()),
            )
            _upsert(tx, run_id, seq, message)

    def copy(self, from_run_id: str, to_run_id: str, before_seq: int) -> int:
        messages = self.read(from_run_id, before_seq)
        with self.db.transaction() as tx:
            for seq, message in enumerate(messages):
                _upsert(tx, to_run_id, seq, message)
        return len(messages)

    def stored_answers(self, run_id: str) -> dict[int, str]:
        """When each answer of a run was stored, by sequence number (first store wins)."""
        rows = self.db.query(
            "SELECT seq, min(created_at) AS at FROM model_calls WHERE run_id=? GROUP BY seq",
            (run_id,),
        )
        return {int(row["seq"]): str(row["at"]) for row in rows}


def _upsert(tx: Tx, run_id: str, seq: int, message: dict[str, Any]) -> None:
    tx.execute(
        "INSERT INTO transcript (run_id, seq, role, message, created_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (run_id, seq) DO UPDATE SET role=excluded.role, message=excluded.message",
        (run_id, seq, message["role"], json.dumps(message), now_text()),
    )


class TranscriptActivities:
    def __init__(self, store: TranscriptStore) -> None:
        self.store = store

    @activity.defn(name="copy_transcript")
    async def copy_transcript(self, copy: TranscriptCopy) -> int:
        """Give a fork its parent's conversation up to where it restarts. Idempotent."""
        return await asyncio.to_thread(
            self.store.copy, copy.from_run_id, copy.to_run_id, copy.before_seq
        )
