"""A store's queue is named after the store itself (activities/store_queue.py): the same
store gives the same queue wherever its data dir is carried, another store another one
even at the same path, and a store every replica shares (PostgreSQL) none."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from durable_agents.activities.sql import PostgresDatabase, SqliteDatabase
from durable_agents.activities.store_queue import store_queue
from tests.conftest import drop_schema, postgres_or_skip


def sqlite_at(data_dir: Path) -> SqliteDatabase:
    return SqliteDatabase(data_dir / "agent.sqlite3")


def test_the_same_store_has_the_same_queue_wherever_it_is(tmp_path):
    queue = store_queue("agents", sqlite_at(tmp_path / "a"))
    assert queue is not None and queue.startswith("agents@")
    assert store_queue("agents", sqlite_at(tmp_path / "a")) == queue  # a restarted replica
    shutil.move(tmp_path / "a", tmp_path / "moved")  # its data dir carried elsewhere
    assert store_queue("agents", sqlite_at(tmp_path / "moved")) == queue
    # Another store at the first one's path (another machine's /data): another queue.
    assert store_queue("agents", sqlite_at(tmp_path / "a")) not in (None, queue)


def test_a_store_every_replica_shares_has_no_queue_of_its_own():
    url, schema = postgres_or_skip(), f"t_{uuid.uuid4().hex[:12]}"
    try:
        assert store_queue("agents", PostgresDatabase(url, schema=schema)) is None
    finally:
        drop_schema(url, schema)
