"""What every simulated provider shares: idempotency keys honoured the way Stripe does,
and an effects journal that counts what was really done. Plain sqlite3: a provider is
someone else's system, with its own database."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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

Row = dict[str, Any]
Operation = Callable[[sqlite3.Connection, str, dict[str, Any]], dict[str, Any]]


class ProviderConflict(Exception):
    """The provider refuses a key reused with other parameters."""


def _now() -> str:
    return datetime.now(UTC).isoformat()


class SimulatedProvider:
    name = "provider"
    schema = ""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.path = root / f"{self.name}.sqlite3"
        self._local = threading.local()
        self._connection().executescript(BASE_SCHEMA + ";" + self.schema)
        self.operations: dict[str, Operation] = {}

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            self._local.conn = conn
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[Row]:
        return [dict(row) for row in self._connection().execute(sql, params).fetchall()]

    def call(self, key: str, operation: str, params: dict[str, Any], run_id: str) -> dict[str, Any]:
        """Perform `operation` at most once per key; a repeat gets the first response."""
        digest = hashlib.sha256(
            json.dumps({"op": operation, "params": params}, sort_keys=True).encode()
        ).hexdigest()
        with self.transaction() as conn:
            seen = conn.execute(
                "SELECT fingerprint, response FROM requests WHERE idempotency_key=?", (key,)
            ).fetchall()
            if seen:
                if seen[0]["fingerprint"] != digest:
                    raise ProviderConflict(
                        f"{self.name}: key {key!r} was used with other parameters"
                    )
                conn.execute(
                    "UPDATE requests SET replays = replays + 1 WHERE idempotency_key=?", (key,)
                )
                response: dict[str, Any] = json.loads(seen[0]["response"])
                return response
            response = self.operations[operation](conn, run_id, params)
            if response.get("ok", True):
                conn.execute(
                    "INSERT INTO effects (idempotency_key, run_id, operation, detail, created_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (key, run_id, operation, json.dumps(params, sort_keys=True), _now()),
                )
            conn.execute(
                "INSERT INTO requests (idempotency_key, fingerprint, response, created_at)"
                " VALUES (?, ?, ?, ?)",
                (key, digest, json.dumps(response), _now()),
            )
            return response

    def effects(self, run_id: str | None = None) -> list[Row]:
        sql = "SELECT idempotency_key, run_id, operation, detail, created_at FROM effects"
        params: tuple[str, ...] = ()
        if run_id is not None:
            # A run's books are kept under its identity, "<workflow id>@<first run id>".
            prefix = f"{run_id}@"
            sql += " WHERE run_id=? OR substr(run_id, 1, ?)=?"
            params = (run_id, str(len(prefix)), prefix)
        rows = self.query(sql + " ORDER BY id", params)
        return [row | {"detail": json.loads(row["detail"])} for row in rows]

    def replays(self, key: str) -> int:
        rows = self.query("SELECT replays FROM requests WHERE idempotency_key=?", (key,))
        return int(rows[0]["replays"]) if rows else 0
