"""The check that a worker's store holds the run it is asked to act for, on SQLite and
PostgreSQL: a store with fewer of the run's transcript rows than the workflow wrote is
refused, retryably and by name, before the model is asked, a tool called or a row
written; the store that holds the run answers as before."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.crash_points import CrashPoints
from durable_agents.activities.model import ModelActivities
from durable_agents.activities.store_holds import STORE_MISSING, check_holds
from durable_agents.activities.stores import Stores
from durable_agents.activities.tools import ToolActivities
from durable_agents.activities.transcript import TranscriptActivities, TranscriptStore
from durable_agents.examples.providers import Providers
from durable_agents.runtime.settings import Settings
from durable_agents.testing import ScriptedModel, say
from durable_agents.workflows.activity_io import ChatMessage, ModelCallInput, TranscriptCopy
from tests.conftest import EXAMPLE_AGENTS, drop_schema, pay_invoice_call, postgres_or_skip

RUN = "chat-1@first"


def message(seq: int, role: str = "user") -> dict[str, str]:
    return {"role": role, "content": f"message {seq}"}


def refused(raised: pytest.ExceptionInfo[ApplicationError]) -> ApplicationError:
    err = raised.value
    assert err.type == STORE_MISSING and not err.non_retryable
    assert "\n" not in err.message  # one line, for a log and the Web UI
    return err


def test_a_store_lacking_the_runs_rows_is_refused_by_name(sql_database):
    store = TranscriptStore(sql_database)
    store.put_many(RUN, [(seq, message(seq)) for seq in range(4)])
    check_holds(sql_database, store, RUN, before_seq=6, written=4)  # all there
    check_holds(sql_database, store, RUN, before_seq=6, written=None)  # a run that kept no count
    check_holds(sql_database, store, "another@run", before_seq=3, written=0)  # nothing yet

    with pytest.raises(ApplicationError) as raised:
        check_holds(sql_database, store, RUN, before_seq=6, written=5)
    err = refused(raised)
    assert sql_database.where in err.message and RUN in err.message
    assert "4 of its 5 transcript rows before seq 6" in err.message
    assert "AGENT_DATABASE_URL" in err.message
    # Rows of another run, or past the call's own seq, are not the run's past.
    with pytest.raises(ApplicationError):
        check_holds(sql_database, store, "another@run", before_seq=6, written=1)
    with pytest.raises(ApplicationError):
        check_holds(sql_database, store, RUN, before_seq=2, written=3)
    if sql_database.local:
        assert err.message.count("sqlite:") == 1 and "AGENT_DATA_DIR" in err.message
    else:
        assert "@" not in err.message.split("postgresql:")[1].split(")")[0]  # no user
        assert "AGENT_DATABASE_SCHEMA" in err.message


@pytest.fixture(params=["sqlite", "postgres"])
def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Settings, ...]]:
    """Two replicas' settings whose stores are not shared: two data dirs, or two schemas
    of one PostgreSQL (each with its own data dir for the providers)."""
    if request.param == "sqlite":
        yield tuple(Settings(data_dir=tmp_path / name) for name in ("a", "b"))
        return
    url = postgres_or_skip()
    schemas = [f"t_{uuid.uuid4().hex[:12]}" for _ in range(2)]
    yield tuple(
        Settings(data_dir=tmp_path / name, database_url=url, database_schema=schema)
        for name, schema in zip(("a", "b"), schemas, strict=True)
    )
    for schema in schemas:
        drop_schema(url, schema)


def turn(seq: int, text: str, rows_written: int) -> ModelCallInput:
    """A conversation's model call: the person's message at `seq`, the reply after it."""
    return ModelCallInput(
        run_id=RUN,
        append=[ChatMessage(seq=seq, role="user", content=text)],
        reply_seq=seq + 1,
        rows_written=rows_written,
    )


async def test_no_model_call_on_a_store_without_the_runs_past(two_stores):
    """Replica A answered the first turn; B, whose store has none of it, is asked the
    second: it asks the model nothing and writes nothing. A then answers with the whole
    thread in the request."""
    model = ScriptedModel([say("Hello Jane."), say("It ships today.")])
    a, b = (
        ModelActivities(s, Stores.open(s), EXAMPLE_AGENTS, lambda _s, _m: model) for s in two_stores
    )
    env = ActivityEnvironment()
    await env.run(a.call_model, turn(0, "Hi", rows_written=0))
    assert len(model.requests) == 1

    with pytest.raises(ApplicationError) as raised:
        await env.run(b.call_model, turn(2, "Where is my order?", rows_written=2))
    err = refused(raised)
    assert b.stores.db.where in err.message and "0 of its 2 transcript rows" in err.message
    assert len(model.requests) == 1  # no model call on a partial past
    assert b.stores.transcript.rows_of(RUN) == 0  # and nothing written there

    reply = await env.run(a.call_model, turn(2, "Where is my order?", rows_written=2))
    assert reply.content_preview == "It ships today."
    contents = [m.get("content") for m in model.requests[-1].messages]
    assert contents == ["Hi", "Hello Jane.", "Where is my order?"]


async def test_no_tool_runs_on_a_store_without_the_runs_past(two_stores):
    """The payment waits on B, whose store lacks the run's rows (and so its ledger): no
    charge; on A, whose store holds them, it is made once."""
    pay = pay_invoice_call(RUN).model_copy(update={"rows_written": 3})
    a, b = (
        ToolActivities(Stores.open(s), CrashPoints(None, s.data_dir), EXAMPLE_AGENTS, s.data_dir)
        for s in two_stores
    )
    a.stores.transcript.put_many(RUN, [(seq, message(seq)) for seq in range(3)])
    env = ActivityEnvironment()
    with pytest.raises(ApplicationError) as raised:
        await env.run(b.run_tool, pay)
    assert b.stores.db.where in refused(raised).message
    assert all(Providers.open(s.data_dir).effects(RUN) == [] for s in two_stores)
    assert b.stores.ledger.effects(RUN) == []

    outcome = await env.run(a.run_tool, pay)
    again = await env.run(a.run_tool, pay)
    assert outcome.ok and again.replayed_from_ledger
    charges = [Providers.open(s.data_dir).payments.effects(RUN) for s in two_stores]
    assert [len(made) for made in charges] == [1, 0]


async def test_a_fork_copies_nothing_from_a_store_without_its_parent(two_stores):
    """A fork's copy of its parent's past runs where the parent's rows are; elsewhere it
    is refused before anything is copied."""
    a, b = (
        TranscriptActivities(stores.transcript, stores.pruned, stores.ledger)
        for stores in (Stores.open(s) for s in two_stores)
    )
    a.store.put_many(RUN, [(seq, message(seq)) for seq in range(5)])
    copy = TranscriptCopy(from_run_id=RUN, to_run_id="fork-1@f", before_seq=3, rows_written=5)
    env = ActivityEnvironment()
    with pytest.raises(ApplicationError) as raised:
        await env.run(b.copy_transcript, copy)
    refused(raised)
    assert b.store.rows_of("fork-1@f") == 0
    assert await env.run(a.copy_transcript, copy) == 3
