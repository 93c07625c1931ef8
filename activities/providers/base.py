"""What every simulated provider shares: idempotency keys honoured the way Stripe does,
and an effects journal that counts what was really done."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from activities.fingerprints import fingerprint, now_text
from activities.sql import SqliteDatabase, Tx, apply_schema

BASE_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    idempotency_key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    response TEXT NOT NULL,
    replays INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS effects (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    operation TEXT NOT NULL,
    detail TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS effects_by_run ON effects (run_id)
"""

Operation = Callable[[Tx, str, dict[str, Any]], dict[str, Any]]


class ProviderConflict(Exception):
    """The provider refuses a key reused with other parameters."""


class SimulatedProvider:
    name = "provider"
    schema = ""

    def __init__(self, root: Path) -> None:
        self.db = SqliteDatabase(root / f"{self.name}.sqlite3")
        apply_schema(self.db, BASE_SCHEMA + ";" + self.schema)
        self.operations: dict[str, Operation] = {}

    def call(self, key: str, operation: str, params: dict[str, Any], run_id: str) -> dict[str, Any]:
        """Perform `operation` at most once per key; a repeat gets the first response."""
        digest = fingerprint({"op": operation, "params": params})
        with self.db.transaction() as tx:
            seen = tx.execute(
                "SELECT fingerprint, response FROM requests WHERE idempotency_key=?", (key,)
            )
            if seen:
                if seen[0]["fingerprint"] != digest:
                    raise ProviderConflict(
                        f"{self.name}: key {key!r} was used with other parameters"
                    )
                tx.execute(
                    "UPDATE requests SET replays = replays + 1 WHERE idempotency_key=?", (key,)
                )
                response: dict[str, Any] = json.loads(seen[0]["response"])
                return response
            response = self.operations[operation](tx, run_id, params)
            if response.get("ok", True):
                tx.execute(
                    "INSERT INTO effects (idempotency_key, run_id, operation, detail, created_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (key, run_id, operation, json.dumps(params, sort_keys=True), now_text()),
                )
            tx.execute(
                "INSERT INTO requests (idempotency_key, fingerprint, response, created_at)"
                " VALUES (?, ?, ?, ?)",
                (key, digest, json.dumps(response), now_text()),
            )
            return response

    def effects(self, run_id: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT idempotency_key, run_id, operation, detail, created_at FROM effects"
        params: tuple[str, ...] = ()
        if run_id is not None:
            # A run's books are kept under its identity, "<workflow id>@<first run id>".
            prefix = f"{run_id}@"
            sql += " WHERE run_id=? OR substr(run_id, 1, ?)=?"
            params = (run_id, str(len(prefix)), prefix)
        rows = self.db.query(sql + " ORDER BY id", params)
        return [row | {"detail": json.loads(row["detail"])} for row in rows]

    def replays(self, key: str) -> int:
        rows = self.db.query("SELECT replays FROM requests WHERE idempotency_key=?", (key,))
        return int(rows[0]["replays"]) if rows else 0
