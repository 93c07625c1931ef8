"""The conversation, keyed by (run id, sequence number), and the model-call memo.

The workflow only ever holds sequence numbers and previews; whole messages live here.
"""

from __future__ import annotations

import json
from typing import Any

from activities.database import Database


class TranscriptStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, run_id: str, seq: int, message: dict[str, Any]) -> None:
        """Write the message at its sequence number. The workflow decides what goes at each
        seq, so a rewrite (a retry, or a reset's new branch) replaces the old row."""
        with self.db.transaction() as conn:
            _upsert(conn, run_id, seq, message)

    def read(self, run_id: str, before_seq: int | None = None) -> list[dict[str, Any]]:
        sql = "SELECT message FROM transcript WHERE run_id = ?"
        params: list[Any] = [run_id]
        if before_seq is not None:
            sql += " AND seq < ?"
            params.append(before_seq)
        with self.db.connect() as conn:
            rows = conn.execute(sql + " ORDER BY seq", params).fetchall()
        return [json.loads(row["message"]) for row in rows]

    def recall(self, run_id: str, seq: int, fingerprint: str) -> dict[str, Any] | None:
        """The stored answer to exactly this request at this point of the run, if any."""
        with self.db.connect() as conn:
            row = conn.execute(
                "SELECT response FROM model_calls WHERE run_id=? AND seq=? AND fingerprint=?",
                (run_id, seq, fingerprint),
            ).fetchone()
        return json.loads(row["response"]) if row else None

    def remember(
        self,
        run_id: str,
        seq: int,
        fingerprint: str,
        response: dict[str, Any],
        message: dict[str, Any],
    ) -> None:
        """Store the model's answer and its transcript message in one transaction."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO model_calls (run_id, seq, fingerprint, response)"
                " VALUES (?, ?, ?, ?)",
                (run_id, seq, fingerprint, json.dumps(response)),
            )
            _upsert(conn, run_id, seq, message)

    def model_calls(self, run_id: str) -> int:
        with self.db.connect() as conn:
            row = conn.execute(
                "SELECT count(*) AS n FROM model_calls WHERE run_id=?", (run_id,)
            ).fetchone()
        return int(row["n"])


def _upsert(conn: Any, run_id: str, seq: int, message: dict[str, Any]) -> None:
    conn.execute(
        "INSERT INTO transcript (run_id, seq, role, message) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (run_id, seq) DO UPDATE SET role=excluded.role, message=excluded.message",
        (run_id, seq, message["role"], json.dumps(message)),
    )
