"""The effect ledger: an idempotency key's first result is its only result.

Same key and same request: the recorded result comes back and nothing runs again.
Same key, different request: a clear, non-retryable error (Stripe's semantics).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from typing import Any

from activities.database import Database


class IdempotencyConflict(Exception):
    """The key was already used for a different request."""


def fingerprint(tool: str, arguments: dict[str, Any]) -> str:
    canonical = json.dumps({"tool": tool, "arguments": arguments}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


class EffectLedger:
    def __init__(self, db: Database) -> None:
        self.db = db

    def run_once(
        self,
        key: str,
        run_id: str,
        tool: str,
        arguments: dict[str, Any],
        perform: Callable[[sqlite3.Connection], dict[str, Any]],
    ) -> tuple[dict[str, Any], bool]:
        """Perform the effect at most once per key. Returns (result, replayed).

        `perform` writes through the connection it is given, so the effect and its
        ledger row commit together or not at all.
        """
        digest = fingerprint(tool, arguments)
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT fingerprint, result FROM effects WHERE idempotency_key=?", (key,)
            ).fetchone()
            if row is not None:
                if row["fingerprint"] != digest:
                    raise IdempotencyConflict(
                        f"idempotency key {key!r} was already used for a different {tool} "
                        "request; refusing to perform a second, different effect under it"
                    )
                return json.loads(row["result"]), True
            result = perform(conn)
            conn.execute(
                "INSERT INTO effects (idempotency_key, run_id, tool, fingerprint, result)"
                " VALUES (?, ?, ?, ?, ?)",
                (key, run_id, tool, digest, json.dumps(result)),
            )
        return result, False

    def effects(self, run_id: str) -> list[dict[str, Any]]:
        with self.db.connect() as conn:
            rows = conn.execute(
                "SELECT idempotency_key, tool, result, created_at FROM effects"
                " WHERE run_id=? ORDER BY created_at",
                (run_id,),
            ).fetchall()
        return [dict(row) | {"result": json.loads(row["result"])} for row in rows]
