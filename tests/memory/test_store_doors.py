"""Every table of every store a run's or a subject's data lands in, taken from the code:
the tables `Stores.open` makes on a fresh database (activities/stores.py), each named in
activities/pruning.ROWS_GO_WITH with how its rows go. A table made and not named fails
here; so does one whose rows outlive forgetting or pruning, or that a dry run touches.

Forgetting: jane's conversations (closed) remember and recall through the offline model,
streaming their replies to the live log; a memory tool's receipt, an MCP tool list and a
what-if report naming her run are written through the stores' own APIs. After
`forget_subject`, no table holds a row that names her or one of her runs (the live log
read after forgetting too), tombstones aside (a pruned run's names the run, never her);
bob's rows are where they were.

A dry-run prune: closed runs, old memories and an old report in every table; a dry run
deletes nothing from any table and counts what would go (a run's rows in rows_deleted,
memories and reports in theirs); the prune after it deletes exactly what it counted."""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from durable_agents.activities.pruning import ROWS_GO_WITH
from durable_agents.activities.sql import SqlDatabase
from durable_agents.activities.stores import Stores
from durable_agents.control import conversations, memory, pruning, runs
from durable_agents.runtime.settings import Settings
from durable_agents.worker.main import build_worker
from durable_agents.workflows.activity_io import PruneReport
from durable_agents.workflows.people_inputs import Actor
from tests.conftest import PRUNE_NOW, pruning_worker, settings_for


def tables_of(db: SqlDatabase) -> list[str]:
    """The tables of a SQLite database, SQLite's own and a full-text index's shadow
    tables (its rows, read through the index itself) aside."""
    rows = db.query("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
    virtual = [r["name"] for r in rows if "VIRTUAL TABLE" in str(r["sql"]).upper()]
    return sorted(
        r["name"]
        for r in rows
        if not r["name"].startswith("sqlite_")
        and not any(r["name"].startswith(f"{v}_") for v in virtual)
    )


def tables_the_stores_make() -> list[str]:
    """What `Stores.open` makes on a fresh SQLite database: the code's own list."""
    with tempfile.TemporaryDirectory() as scratch:
        settings = Settings(data_dir=Path(scratch), database_url=None)
        return tables_of(Stores.open(settings).db)


TABLES = tables_the_stores_make()
# Where forgetting and pruning leave a run's tombstone: its id, nothing of what it held.
TOMBSTONES = "pruned_runs"


def rows_of(db: SqlDatabase, table: str) -> list[str]:
    return [json.dumps(dict(row), default=str) for row in db.query(f"SELECT * FROM {table}")]


def naming(rows: list[str], marks: tuple[str, ...]) -> list[str]:
    return [row for row in rows if any(mark in row for mark in marks)]


def test_every_table_the_stores_make_says_how_its_rows_go():
    assert sorted(ROWS_GO_WITH) == TABLES


# -- forgetting ----------------------------------------------------------------------------


@dataclass
class Forgotten:
    jane: tuple[str, ...]  # her name and her runs' workflow ids
    bob: tuple[str, ...]
    before: dict[str, list[str]]
    after: dict[str, list[str]]
    report: memory.ForgetReport


async def chat(client: Any, settings: Settings, who: str, text: str) -> tuple[str, str]:
    """A closed conversation about `who` that said `text`: its id and store key."""
    cid = f"chat-{uuid.uuid4().hex[:8]}"
    request = conversations.conversation_request(
        "support-chat", label="chat", subject={"customer": who}
    )
    await conversations.open_conversation(client, settings, request, cid)
    await conversations.send(client, cid, conversations.message(text, by=who))
    key = (await runs.get_state(client, cid)).store_key
    await conversations.close(client, cid, Actor(by=who))
    await runs.wait_for_outcome(client, cid)
    return cid, key


def by_the_store_apis(stores: Stores, who: str, key: str, cid: str) -> None:
    """What the runs of this test do not write themselves: the forget tool's receipt, an
    MCP server's tool list, a what-if report naming the run."""
    namespace = f"customer/{who}"
    step = f"{key}/step-90"
    gone = stores.memory.remember(
        namespace, f"{who} moved away", {}, key=f"{step}/call-r", run_id=key, step=90
    )
    stores.memory.forget_once(namespace, gone, f"{step}/call-f")
    stores.transcript.put_tool_list(key, "kb", {"tools": [{"name": "lookup"}]})
    stores.reports.save(f"report-{who}", "a prompt", {"runs": [{"run_id": cid}]})


def snapshot(db: SqlDatabase) -> dict[str, list[str]]:
    return {table: rows_of(db, table) for table in tables_of(db)}


@pytest.fixture(scope="module")
async def forgotten(dev_env, model_server, tmp_path_factory) -> AsyncIterator[Forgotten]:
    client = dev_env.client
    settings = settings_for(client, tmp_path_factory.mktemp("forget"), model_server.port)
    jane, bob = f"jane{uuid.uuid4().hex[:8]}", f"bob{uuid.uuid4().hex[:8]}"
    stores = Stores.open(settings)
    async with build_worker(client, settings):
        told, told_key = await chat(client, settings, jane, f"Please remember that I am {jane}")
        asked, _ = await chat(client, settings, jane, f"What do you know about {jane}?")
        bobs, bobs_key = await chat(client, settings, bob, f"Please remember that I am {bob}")
        by_the_store_apis(stores, jane, told_key, told)
        by_the_store_apis(stores, bob, bobs_key, bobs)
        before = snapshot(stores.db)
        report = await memory.forget_subject(client, settings, f"customer/{jane}")
        after = snapshot(stores.db)
    yield Forgotten((jane, told, asked), (bob, bobs), before, after, report)


def test_forgetting_cleared_every_run_of_hers(forgotten: Forgotten):
    assert forgotten.report.runs_open == [] and len(forgotten.report.runs_cleared) == 2


@pytest.mark.parametrize("table", TABLES)
def test_forgetting_leaves_nothing_of_the_subject_in(forgotten: Forgotten, table: str):
    before, after = forgotten.before[table], forgotten.after[table]
    jane, bob = forgotten.jane, forgotten.bob
    if table == TOMBSTONES:
        assert naming(after, jane[:1]) == []  # her runs' ids, never her name
        return
    if ROWS_GO_WITH[table] != "bookkeeping":
        assert naming(before, jane), f"the test wrote nothing of jane's into {table}"
    assert naming(after, jane) == []
    assert naming(after, bob) == naming(before, bob)


# -- a dry-run prune -----------------------------------------------------------------------


@dataclass
class Pruned:
    runs: tuple[str, ...]  # the closed runs' workflow ids
    before: dict[str, list[str]]
    after_dry: dict[str, list[str]]
    after: dict[str, list[str]]
    dry: PruneReport
    done: PruneReport

    def went(self, table: str) -> int:
        return len(self.before[table]) - len(self.after[table])


@pytest.fixture(scope="module")
async def pruned(dev_env, model_server, tmp_path_factory) -> AsyncIterator[Pruned]:
    client = dev_env.client
    made = settings_for(client, tmp_path_factory.mktemp("prune"), model_server.port)
    settings = made.model_copy(update={"memory_retention_days": 1.0})
    who = f"ann{uuid.uuid4().hex[:8]}"
    stores = Stores.open(settings)
    async with build_worker(client, settings):
        told, told_key = await chat(client, settings, who, f"Please remember that I am {who}")
        asked, _ = await chat(client, settings, who, f"What do you know about {who}?")
        by_the_store_apis(stores, who, told_key, told)
        with stores.db.transaction() as tx:  # past AGENT_MEMORY_RETENTION_DAYS
            for table in ("memories", "memories_forgotten"):
                tx.execute(f"UPDATE {table} SET created_at = '2020-01-01T00:00:00+00:00'")
        async with pruning_worker(client, settings) as short:
            before = snapshot(stores.db)
            dry = await pruning.prune(client, short, PRUNE_NOW, dry_run=True)
            after_dry = snapshot(stores.db)
            done = await pruning.prune(client, short, PRUNE_NOW, dry_run=False)
            after = snapshot(stores.db)
    yield Pruned((told, asked), before, after_dry, after, dry, done)


def test_the_dry_run_counts_what_the_prune_then_deleted(pruned: Pruned):
    dry, done = pruned.dry, pruned.done
    assert dry.dry_run and not done.dry_run and dry.pruned == done.pruned
    run_rows = sum(pruned.went(t) for t, goes in ROWS_GO_WITH.items() if goes == "run")
    assert dry.rows_deleted == done.rows_deleted == run_rows > 0
    assert dry.memories_deleted == done.memories_deleted == pruned.went("memories") > 0
    assert dry.whatif_reports_deleted == done.whatif_reports_deleted
    assert done.whatif_reports_deleted == pruned.went("whatif_reports") > 0


@pytest.mark.parametrize("table", TABLES)
def test_a_dry_run_prune_deletes_nothing_and_the_prune_leaves_no_run_in(pruned: Pruned, table: str):
    before, after = pruned.before[table], pruned.after[table]
    assert pruned.after_dry[table] == before  # the dry run: nothing deleted or changed
    if table == TOMBSTONES:
        assert all(naming(after, (run,)) for run in pruned.runs)
        return
    assert naming(after, pruned.runs) == []  # nothing of a pruned run is left
    if ROWS_GO_WITH[table] != "bookkeeping":
        assert before, f"the test wrote nothing into {table}"
        assert after == []  # every row was old: of a closed run, or past its retention
