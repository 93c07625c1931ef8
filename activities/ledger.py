"""The effect ledger: an idempotency key's first result is its only result.

Same key and same request: the recorded result comes back and the provider is not
asked again. Same key, different request: a clear, non-retryable error (Stripe's
semantics). The ledger sits in front of providers that honour the key themselves, so
a crash between the provider acting and the ledger recording still ends in one effect.
"""

from __future__ import annotations

from typing import Any

from durable_agents.activities import fingerprints
from durable_agents.activities.fingerprints import now_text
from durable_agents.activities.sql import Sealed, SqlDatabase, StoreSchema, apply_schema
from durable_agents.runtime.encryption import Keyring

# The tables, as this release's migrations (activities/sql.py: StoreSchema).
SCHEMA = StoreSchema(
    "effect_ledger",
    (
        """
CREATE TABLE IF NOT EXISTS effects (
    idempotency_key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    result TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS effects_by_run ON effects (run_id)
""",
        # Runs whose rows a prune removed, ledger and all: nothing acts for them again.
        """
CREATE TABLE IF NOT EXISTS pruned_runs (run_id TEXT PRIMARY KEY, pruned_at TEXT NOT NULL)
""",
        # Signed forks' nonces, each with the run it started: outside the run, so a
        # terminate-and-restart under the same id cannot count the same signature again.
        """
CREATE TABLE IF NOT EXISTS signed_uses (
    nonce TEXT PRIMARY KEY,
    used_by TEXT NOT NULL,
    used_at TEXT NOT NULL
)
""",
    ),
)


class IdempotencyConflict(Exception):
    """The key was already used for a different request."""


def fingerprint(tool: str, arguments: dict[str, Any]) -> str:
    return fingerprints.fingerprint({"tool": tool, "arguments": arguments})


class EffectLedger:
    def __init__(self, db: SqlDatabase, keyring: Keyring | None = None) -> None:
        self.db = db
        self.sealed = Sealed(keyring)
        apply_schema(db, SCHEMA)

    def recorded(self, key: str, tool: str, digest: str) -> dict[str, Any] | None:
        """The result recorded under this key, if any; a conflict if it was another request."""
        rows = self.db.query(
            "SELECT fingerprint, result FROM effects WHERE idempotency_key=?", (key,)
        )
        if not rows:
            return None
        if rows[0]["fingerprint"] != digest:
            raise IdempotencyConflict(
                f"idempotency key {key!r} was already used for a different {tool} request; "
                "refusing to perform a second, different effect under it"
            )
        result: dict[str, Any] = self.sealed.load(rows[0]["result"], _row(key))
        return result

    def record(
        self, key: str, run_id: str, tool: str, digest: str, result: dict[str, Any]
    ) -> dict[str, Any]:
        """Record the result; if another attempt recorded first, theirs stands."""
        with self.db.transaction() as tx:
            tx.execute(
                "INSERT INTO effects (idempotency_key, run_id, tool, fingerprint, result,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (idempotency_key) DO NOTHING",
                (key, run_id, tool, digest, self.sealed.dump(result, _row(key)), now_text()),
            )
        stored = self.recorded(key, tool, digest)
        assert stored is not None
        return stored

    def claim(self, nonce: str, run_id: str) -> str | None:
        """Take a signature's nonce for this run; None when it is (or already was) this
        run's, else the run that took it first."""
        with self.db.transaction() as tx:
            tx.execute(
                "INSERT INTO signed_uses (nonce, used_by, used_at) VALUES (?, ?, ?)"
                " ON CONFLICT (nonce) DO NOTHING",
                (nonce, run_id, now_text()),
            )
        [row] = self.db.query("SELECT used_by FROM signed_uses WHERE nonce=?", (nonce,))
        first: str = row["used_by"]
        return None if first == run_id else first

    def pruned(self, run_id: str) -> bool:
        """Whether a prune removed this run's rows (activities/pruning.py)."""
        return bool(self.db.query("SELECT 1 AS x FROM pruned_runs WHERE run_id=?", (run_id,)))

    def effects(self, run_id: str) -> list[dict[str, Any]]:
        rows = self.db.query(
            "SELECT idempotency_key, tool, result, created_at FROM effects"
            " WHERE run_id=? ORDER BY created_at",
            (run_id,),
        )
        return [
            row | {"result": self.sealed.load(row["result"], _row(row["idempotency_key"]))}
            for row in rows
        ]


def _row(key: str) -> str:
    return f"effects/{key}"
