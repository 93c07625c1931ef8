"""Sessions the server has ended: a signed cookie alone cannot be taken back, so sign-out
writes the session's id here, on the stores' database (SQLite under the data dir, or
PostgreSQL: every console of a deployment sees it), until the cookie would have expired.
A password change or a removed user ends every session of theirs without a row here: a
session carries a fingerprint of the user's password entry (console/users.py)."""

from __future__ import annotations

import time

from durable_agents.activities.sql import SqlDatabase, StoreSchema, apply_schema

# The tables, as this release's migrations (activities/sql.py: StoreSchema).
SCHEMA = StoreSchema(
    "console_sessions",
    (
        """
CREATE TABLE IF NOT EXISTS console_signed_out (
    session TEXT PRIMARY KEY,
    until DOUBLE PRECISION NOT NULL
);
""",
    ),
)


class SignedOutSessions:
    def __init__(self, db: SqlDatabase) -> None:
        self.db = db
        apply_schema(db, SCHEMA)

    def end(self, session: str, lasts_seconds: float) -> None:
        """The session counts no more, from now until its cookie would expire anyway."""
        now = time.time()
        with self.db.transaction() as tx:
            tx.execute("DELETE FROM console_signed_out WHERE until < ?", [now])
            tx.execute(
                "INSERT INTO console_signed_out (session, until) VALUES (?, ?) "
                "ON CONFLICT (session) DO NOTHING",
                [session, now + lasts_seconds],
            )

    def ended(self, session: str) -> bool:
        rows = self.db.query(
            "SELECT 1 AS ended FROM console_signed_out WHERE session = ?", [session]
        )
        return bool(rows)
