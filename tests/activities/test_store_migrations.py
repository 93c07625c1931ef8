"""The stores' schema has a version: a database the previous release wrote (no versions
yet, tests/fixtures/write_previous_stores.py made it with that release's own code) is
brought up to this release's in place, on SQLite and on PostgreSQL, with every row kept
and nothing done twice; a database a newer release wrote is refused in one line and never
written to; a release's own migration runs once."""

from __future__ import annotations

import re
import shutil
import sqlite3
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from durable_agents.activities import transcript
from durable_agents.activities.ledger import EffectLedger
from durable_agents.activities.sql import (
    PostgresDatabase,
    SqlDatabase,
    SqliteDatabase,
    StoreSchema,
    StoreSchemaNewer,
    apply_schema,
)
from durable_agents.activities.stores import Stores
from durable_agents.activities.transcript import TranscriptStore
from durable_agents.activities.whatif_reports import WhatIfReports
from durable_agents.console.sessions import SignedOutSessions
from durable_agents.control.runs import RunError
from durable_agents.control.stored import effect_ledger
from durable_agents.runtime.settings import Settings
from tests.conftest import drop_schema, postgres_or_skip

FIXTURES = Path(__file__).parent.parent / "fixtures"
PAID_KEY = "prev-run@1/step-2/call-7"
PAID = {"ok": True, "charged": "1250.00 EUR", "payment_id": "pay-1"}
STORES = {
    "effect_ledger", "transcript", "live_log", "memory", "whatif_reports", "console_sessions"
}  # fmt: skip


def previous_sqlite(tmp_path: Path) -> Settings:
    shutil.copy(FIXTURES / "stores-0.1.0.sqlite3", tmp_path / "agent.sqlite3")
    settings = Settings(data_dir=tmp_path, metrics_port=0)
    assert settings.database_path == tmp_path / "agent.sqlite3"
    return settings


def previous_postgres(schema: str) -> Settings:
    url = postgres_or_skip()
    text = (FIXTURES / "stores-0.1.0.postgres.sql").read_text()
    text = "\n".join(
        line for line in text.splitlines() if not line.startswith(("\\", "--", "SET "))
    )
    text = re.sub(r"\bprev_release_fixture\b", schema, text)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(text)
    return Settings(database_url=url, database_schema=schema, metrics_port=0)


@pytest.fixture(params=["sqlite", "postgres"])
def previous_release(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "sqlite":
        yield previous_sqlite(tmp_path)
        return
    schema = f"m_{uuid.uuid4().hex[:12]}"
    try:
        yield previous_postgres(schema)
    finally:
        drop_schema(postgres_or_skip(), schema)


def versions(db: SqlDatabase) -> dict[str, int]:
    return {row["store"]: int(row["version"]) for row in db.query("SELECT * FROM store_schemas")}


def test_a_database_of_the_previous_release_is_brought_up_in_place(previous_release):
    stores = Stores.open(previous_release)
    reports, sessions = WhatIfReports(stores.db), SignedOutSessions(stores.db)
    assert {name: v for name, v in versions(stores.db).items() if name in STORES} == {
        name: 1 for name in STORES
    } | {
        "effect_ledger": 3,
        "memory": 2,
    }  # ledger 2: pruned runs, 3: signed forks; memory 2: readers
    assert not stores.ledger.pruned("prev-run@1")
    # Every row kept, readable by this release.
    assert stores.ledger.recorded(PAID_KEY, "pay_invoice", "digest-1") == PAID
    [message] = stores.transcript.read("prev-run@1")
    assert message["content"] == "Pay INV-1"
    [memory] = stores.memory.listing("customer/jane", 10)
    assert memory.text == "prefers email"
    assert "Paying" in [entry.text for entry in stores.live.read("prev-run@1")]
    assert reports.load("report-1") == {"runs": 1}
    assert sessions.ended("session-1")
    # Nothing done twice: the payment's key gives back the payment already made.
    again = stores.ledger.record(PAID_KEY, "prev-run@1", "pay_invoice", "digest-1", {"ok": 0})
    assert again == PAID
    # Opening again (another worker, a restart) changes nothing.
    Stores.open(previous_release)
    assert versions(stores.db) == versions(Stores.open(previous_release).db)


def test_a_database_of_a_newer_release_is_refused_and_never_written(previous_release):
    Stores.open(previous_release)
    db = Stores.open(previous_release).db
    with db.transaction() as tx:
        tx.execute("UPDATE store_schemas SET version=9 WHERE store='effect_ledger'")
    before = dump(db)
    with pytest.raises(StoreSchemaNewer) as refused:
        EffectLedger(db)
    message = str(refused.value)
    assert "\n" not in message
    assert "effect_ledger tables" in message and "version 9" in message and "knows 3" in message
    with pytest.raises(RunError, match="written by a newer release"):
        effect_ledger(previous_release)  # the CLI's way in: one line
    assert dump(db) == before


def test_a_releases_migration_runs_once_and_keeps_every_row(previous_release):
    db = Stores.open(previous_release).db
    later = StoreSchema(
        "transcript",
        (
            transcript.SCHEMA.migrations[0],
            "ALTER TABLE transcript ADD COLUMN author TEXT NOT NULL DEFAULT 'unknown'",
        ),
    )
    apply_schema(db, later)
    apply_schema(db, later)  # a second worker: nothing to do, no error
    assert versions(db)["transcript"] == 2
    [row] = db.query("SELECT run_id, seq, author FROM transcript")
    assert row == {"run_id": "prev-run@1", "seq": 0, "author": "unknown"}
    # This release's code, one version behind now, refuses that database.
    with pytest.raises(StoreSchemaNewer, match=r"transcript tables .* at version 2"):
        TranscriptStore(db)


def test_a_failing_migration_leaves_the_database_as_it_was(tmp_path: Path):
    db = SqliteDatabase(tmp_path / "x.sqlite3")
    good = StoreSchema("things", ("CREATE TABLE things (id TEXT PRIMARY KEY)",))
    apply_schema(db, good)
    broken = StoreSchema("things", (*good.migrations, "ALTER TABLE things ADD COLUMN a; nope"))
    with pytest.raises(sqlite3.Error):
        apply_schema(db, broken)
    assert versions(db) == {"things": 1}
    assert [r["name"] for r in db.query("PRAGMA table_info(things)")] == ["id"]


def dump(db: SqlDatabase) -> list[str]:
    """Every table's rows, in order, to compare a database before and after."""
    if isinstance(db, PostgresDatabase):
        tables = [
            r["tablename"]
            for r in db.query("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        ]
    else:
        tables = [
            r["name"]
            for r in db.query("SELECT name FROM sqlite_master WHERE type='table'")
            if not r["name"].startswith("memory_terms")
        ]
    return [f"{t}: {db.query(f'SELECT * FROM {t}')!r}" for t in sorted(tables)]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_workers_starting_together_on_a_fresh_database_take_turns(backend, tmp_path: Path):
    """Several processes open the stores of an empty database at once (a fleet's first
    start): every one succeeds and each migration ran once."""
    schema = f"f_{uuid.uuid4().hex[:12]}"
    if backend == "sqlite":
        settings = Settings(data_dir=tmp_path, metrics_port=0)
    else:
        settings = Settings(database_url=postgres_or_skip(), database_schema=schema, metrics_port=0)
    start = threading.Barrier(4)

    def open_stores() -> dict[str, int]:
        start.wait()
        return versions(Stores.open(settings).db)

    try:
        with ThreadPoolExecutor(4) as pool:
            seen = list(pool.map(lambda _: open_stores(), range(4)))
    finally:
        if backend == "postgres":
            drop_schema(postgres_or_skip(), schema)
    assert all(found == seen[0] for found in seen) and seen[0]["effect_ledger"] == 3


def test_a_process_opening_a_file_another_is_writing_waits_its_turn_to_switch_it_to_wal(
    tmp_path: Path,
):
    """SQLite refuses a switch to WAL at once, without its busy timeout, while another
    connection holds a write lock (what four workers opening one fresh file together
    meet). The opener tries again until the writer is done; here the writer lets go only
    once the opener has had to try a second time."""
    path = tmp_path / "stores.sqlite3"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE t (x INTEGER)")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO t VALUES (1)")
    switches: list[str] = []
    tried_again = threading.Event()

    class Watched(SqliteDatabase):
        def _connect(self) -> sqlite3.Connection:
            conn = super()._connect()

            def seen(sql: str) -> None:
                if "journal_mode" in sql:
                    switches.append(sql)
                    if len(switches) >= 2:
                        tried_again.set()

            conn.set_trace_callback(seen)
            return conn

    def let_go() -> None:
        tried_again.wait(30)
        writer.execute("COMMIT")

    releaser = threading.Thread(target=let_go)
    releaser.start()
    try:
        Watched(path)
    finally:
        tried_again.set()
        releaser.join()
        writer.close()
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert len(switches) >= 2 and mode == "wal"
