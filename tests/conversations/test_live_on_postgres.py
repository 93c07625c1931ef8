"""Live replies across machines: the worker's stores on PostgreSQL, a console on a data
dir of its own reaching the same database; the console streams the reply's tokens as the
worker writes them, woken by NOTIFY."""

from __future__ import annotations

import asyncio
import signal
import uuid

import pytest

from durable_agents.activities.stream import StreamEntry
from durable_agents.control import conversations
from durable_agents.control.live import LiveReplies, shown
from durable_agents.infra.stack import worker_polling
from tests.conftest import drop_schema, eventually, postgres_or_skip, spawn_worker
from tests.console.live import live_console, signed_in
from tests.console.sse import events


@pytest.fixture
def pg(settings):
    url, schema = postgres_or_skip(), f"live_{uuid.uuid4().hex[:12]}"
    yield settings.model_copy(update={"database_url": url, "database_schema": schema})
    drop_schema(url, schema)


async def listening(reader: LiveReplies) -> bool:
    return reader._listener is not None


async def hear_all(reader: LiveReplies, cid: str) -> list[StreamEntry]:
    heard: list[StreamEntry] = []
    while not any(e.kind == "done" for e in heard):
        got = await reader.after(cid, heard[-1].pos if heard else 0, wait=30)
        assert got, "nothing heard within 30 s"
        heard += got
    return heard


async def test_a_console_elsewhere_streams_a_reply_the_worker_writes(dev_env, pg, tmp_path):
    client, cid = dev_env.client, f"chat-{uuid.uuid4().hex[:8]}"
    assert pg.database_url is not None and pg.database_schema is not None
    worker = spawn_worker(
        pg,
        tmp_path / "worker.log",
        AGENT_DATABASE_URL=pg.database_url,
        AGENT_DATABASE_SCHEMA=pg.database_schema,
    )
    elsewhere = pg.model_copy(update={"data_dir": tmp_path / "console-machine"})
    reader = LiveReplies(elsewhere)
    try:
        await eventually(lambda: worker_polling(pg), within=30)
        request = conversations.conversation_request("support-chat", label="chat?chunk_ms=20")
        await conversations.open_conversation(client, pg, request, cid)
        async with live_console(elsewhere, client) as console:
            http, _ = await signed_in(console, "alice")
            # A reader of its own on this machine, waiting before anything is written.
            hearing = asyncio.create_task(hear_all(reader, cid))
            await eventually(lambda: listening(reader))
            sending = asyncio.create_task(
                conversations.send(client, cid, conversations.message("one two three", by="jo"))
            )
            pieces = []
            async for event in events(http, f"/runs/{cid}/events?deltas=1"):
                if event.name == "delta":
                    pieces.append(event.data["text"])
                if event.name == "segment" and event.data["status"] == "done":
                    break
            reply = await sending
            heard = await hearing
    finally:
        await reader.close()
        worker.send_signal(signal.SIGTERM)
        await asyncio.to_thread(worker.wait, 30)
    assert "".join(pieces) == reply.reply == "You said: one two three"
    assert len(pieces) >= 3
    assert list(shown(heard).values()) == [reply.reply]
    assert reader.notified >= 1
    assert not elsewhere.database_path.exists()  # nothing of the log on this disk
