"""What-if reports are sealed rows; forgetting a run finds the reports that name it (by
its workflow id, whole: never a run whose id only starts the same), on SQLite and on
PostgreSQL."""

from __future__ import annotations

from durable_agents.activities.whatif_reports import WhatIfReports
from durable_agents.runtime.encryption import Keyring, new_key


def test_the_reports_naming_a_run_go_and_no_other(sql_database):
    reports = WhatIfReports(sql_database, Keyring.parse(f"k1={new_key()}"))
    reports.save("r1", "a prompt", {"runs": [{"run_id": "chat-1"}]})
    reports.save("r2", "a prompt", {"runs": [{"run_id": "chat-12"}]})
    reports.save("r3", "a prompt", {"runs": [{"store_key": "chat-1@abc"}]})
    raw = sql_database.query("SELECT report FROM whatif_reports WHERE report_id = 'r1'")
    assert "chat-1" not in raw[0]["report"]  # sealed: found only by opening each
    assert sorted(reports.delete_mentioning(["chat-1"])) == ["r1", "r3"]
    assert reports.load("r2") is not None and reports.load("r1") is None
    assert reports.delete_mentioning([]) == []
