"""Live replies on the dev server: the real openai client streams from the offline model
over HTTP, the deltas land in the stores' live log (not the history), and a worker
SIGKILLed mid-stream leaves a segment that readers drop when the retry's replaces it."""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.request
import uuid

from durable_agents.activities.stream import DeltaStore, StreamEntry
from durable_agents.control import conversations, runs
from durable_agents.control.live import LiveReplies, shown
from durable_agents.infra.stack import worker_polling
from durable_agents.worker.main import build_worker
from durable_agents.workflows.people_inputs import DecideRequest
from tests.conftest import count_effects, eventually, spawn_worker


def live_log(settings):
    from durable_agents.activities.stores import open_database

    return DeltaStore(open_database(settings))


def release(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(url, method="POST")).close()


async def open_chat(client, settings, label: str, cid: str) -> str:
    request = conversations.conversation_request("support-chat", label=label)
    return (await conversations.open_conversation(client, settings, request, cid)).run_id


async def test_a_turn_streams_into_the_live_log_and_the_history_keeps_the_reply(dev_env, settings):
    client, cid = dev_env.client, f"chat-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, settings):
        await open_chat(client, settings, "chat?chunk_ms=2", cid)
        said = conversations.message("Hi, how are you doing today?", by="jane")
        reply = await conversations.send(client, cid, said)
        asked = conversations.message("Please refund A-1001 20.00", by="jane")
        waiting = await conversations.send(client, cid, asked)
        await runs.decide(
            client, cid, DecideRequest(approve=True, by="support-lead", request_id=None)
        )
        refunded = await conversations.await_reply(client, cid, asked.message_id)
        history = await runs.handle(client, cid).fetch_history()
    assert reply.reply == "You said: Hi, how are you doing today?"
    assert waiting.status == "waiting" and "refund_order" in waiting.waiting_for
    assert refunded.status == "answered" and refunded.reply.startswith("Done: ")
    assert count_effects(settings, cid, "refund") == 1

    entries = live_log(settings).read(cid)
    segments = {e.segment for e in entries}
    kinds = [e.kind for e in entries if e.segment == entries[0].segment]
    assert kinds[0] == "open" and kinds[-1] == "done" and kinds.count("delta") >= 2
    # Three streamed calls (the echo, the refund's call, the reply after it), each shown whole.
    assert len(segments) == 3
    texts = list(shown(entries).values())
    assert texts[0] == reply.reply and texts[-1] == refunded.reply
    # The history holds each model call's reply whole, as without streaming; no delta.
    model_calls = {
        event.event_id
        for event in history.events
        if event.activity_task_scheduled_event_attributes.activity_type.name == "call_model"
    }
    replies = [
        json.loads(done.result.payloads[0].data)
        for event in history.events
        if event.HasField("activity_task_completed_event_attributes")
        and (done := event.activity_task_completed_event_attributes).scheduled_event_id
        in model_calls
    ]
    previews = [r.get("content_preview") for r in replies]
    assert reply.reply in previews and refunded.reply in previews


async def test_a_reader_hears_deltas_through_live_replies(dev_env, settings):
    client, cid = dev_env.client, f"chat-{uuid.uuid4().hex[:8]}"
    reader = LiveReplies(settings)
    async with build_worker(client, settings):
        await open_chat(client, settings, "chat?chunk_ms=20", cid)
        sending = asyncio.create_task(
            conversations.send(client, cid, conversations.message("one two three four", by="jo"))
        )
        heard: list[StreamEntry] = []
        pos = 0
        while not any(e.kind == "done" for e in heard):
            got = await reader.after(cid, pos, wait=10)
            assert got, "the reader heard nothing within 10 s"
            heard += got
            pos = got[-1].pos
        reply = await sending
    await reader.close()
    assert list(shown(heard).values()) == [reply.reply]
    assert sum(1 for e in heard if e.kind == "delta") >= 2


async def test_sigkill_mid_stream_the_retry_replaces_the_partial_reply(
    dev_env, settings, model_server, tmp_path
):
    """The turn refunds (approved), then its reply streams and is held after its first
    piece; the worker is SIGKILLed there. The next attempt's segment replaces the cut
    one, the turn completes once, and the refund happened once at the provider."""
    client, cid, hold = dev_env.client, f"chat-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex[:8]
    log = live_log(settings)
    first = spawn_worker(settings, tmp_path / "worker1.log")
    try:
        await eventually(lambda: worker_polling(settings), within=30)
        await open_chat(client, settings, f"chat?hold={hold}", cid)
        sent = conversations.message("Please refund A-1001 20.00", by="jane")
        waiting = await conversations.send(client, cid, sent)
        assert waiting.status == "waiting", waiting
        await runs.decide(client, cid, DecideRequest(approve=True, by="support-lead"))
        sending = asyncio.create_task(conversations.await_reply(client, cid, sent.message_id))

        async def partial() -> bool:  # the reply's first piece is out; the rest is held
            return any(e.kind == "delta" for e in log.read(cid))

        await eventually(partial, within=60)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    second = spawn_worker(settings, tmp_path / "worker2.log")
    try:

        async def retried() -> bool:  # the next attempt opened its own segment
            return len({e.segment for e in log.read(cid) if e.kind == "delta"}) == 2

        await eventually(retried, within=90)
        await asyncio.to_thread(release, f"{model_server.base_url}/scripted/holds/{hold}")
        reply = await sending
        state = await runs.get_state(client, cid)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    entries = log.read(cid)
    with_text = list(dict.fromkeys(e.segment for e in entries if e.kind == "delta"))
    cut, retry = with_text
    closing = {e.segment: e.kind for e in entries if e.kind in ("done", "abandoned")}
    assert closing[cut] == "abandoned" and closing[retry] == "done"
    # seq.attempt.nonce: the same model call, its first attempt and the next one.
    assert cut.split(".")[:2] == [retry.split(".")[0], "1"]
    assert retry.split(".")[1] == "2"
    # What a reader shows: the retry's reply alone, never the partial one glued to it.
    shown_now = shown(entries)
    assert cut not in shown_now and shown_now[retry] == reply.reply
    assert reply.status == "answered" and reply.reply.startswith("Done: ")
    assert state.conversation is not None and state.conversation.turns_total == 1
    assert count_effects(settings, state.store_key, "refund") == 1
