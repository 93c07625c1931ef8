"""What-if reports, kept in our store for the console's page (sealed like transcripts: a
report holds final answers and tool arguments)."""

from __future__ import annotations

import json
from typing import Any

from durable_agents.activities.fingerprints import now_text
from durable_agents.activities.sql import Sealed, SqlDatabase, StoreSchema, apply_schema
from durable_agents.runtime.encryption import Keyring

# The tables, as this release's migrations (activities/sql.py: StoreSchema).
SCHEMA = StoreSchema(
    "whatif_reports",
    (
        """
CREATE TABLE IF NOT EXISTS whatif_reports (
    report_id TEXT PRIMARY KEY,
    variant TEXT NOT NULL,
    report TEXT NOT NULL,
    created_at TEXT NOT NULL
)
""",
    ),
)


class WhatIfReports:
    def __init__(self, db: SqlDatabase, keyring: Keyring | None = None) -> None:
        self.db = db
        self.sealed = Sealed(keyring)
        apply_schema(db, SCHEMA)

    def save(self, report_id: str, variant: str, report: dict[str, Any]) -> None:
        with self.db.transaction() as tx:
            tx.execute(
                "INSERT INTO whatif_reports (report_id, variant, report, created_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (report_id) DO UPDATE"
                " SET variant=excluded.variant, report=excluded.report",
                (report_id, variant[:500], self.sealed.dump(report, _row(report_id)), now_text()),
            )

    def load(self, report_id: str) -> dict[str, Any] | None:
        rows = self.db.query("SELECT report FROM whatif_reports WHERE report_id = ?", (report_id,))
        if not rows:
            return None
        report: dict[str, Any] = self.sealed.load(rows[0]["report"], _row(report_id))
        return report

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest reports' ids, variants and times, newest first."""
        rows = self.db.query(
            "SELECT report_id, variant, created_at FROM whatif_reports"
            " ORDER BY created_at DESC LIMIT ?",
            (limit,),
        )
        return [dict(row) for row in rows]

    def prune(self, before: str, dry_run: bool) -> int:
        """Reports written before `before` (ISO time): removed, or counted when dry."""
        with self.db.transaction() as tx:
            found = tx.execute(
                "SELECT count(*) AS n FROM whatif_reports WHERE created_at < ?", (before,)
            )
            if not dry_run:
                tx.execute("DELETE FROM whatif_reports WHERE created_at < ?", (before,))
        return int(found[0]["n"])

    def delete_mentioning(self, run_ids: list[str]) -> list[str]:
        """Remove every report that names one of these runs (their outputs are in it);
        the ids of the reports removed."""
        if not run_ids:
            return []
        gone = []
        for row in self.db.query("SELECT report_id FROM whatif_reports"):
            report_id = str(row["report_id"])
            text = json.dumps(self.load(report_id))
            if any(f'"{run}"' in text or f'"{run}@' in text for run in run_ids):
                gone.append(report_id)
        with self.db.transaction() as tx:
            for report_id in gone:
                tx.execute("DELETE FROM whatif_reports WHERE report_id = ?", (report_id,))
        return gone


def _row(report_id: str) -> str:
    return f"whatif_reports/{report_id}"
