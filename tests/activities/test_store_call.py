"""Where an activity's store work runs: inline on SQLite (cheaper than a thread hop),
in a thread on PostgreSQL (a slow server must not stall the worker's event loop)."""

from __future__ import annotations

import threading
from typing import Any

from durable_agents.activities.sql import store_call


async def test_store_work_runs_inline_on_sqlite_and_in_a_thread_on_postgres(sql_database):
    def where_and_rows() -> tuple[int, list[dict[str, Any]]]:
        return threading.get_ident(), sql_database.query("SELECT 1 AS one")

    thread, rows = await store_call(sql_database, where_and_rows)
    assert rows == [{"one": 1}]
    inline = thread == threading.get_ident()
    assert inline is (sql_database.where.startswith("sqlite:"))
