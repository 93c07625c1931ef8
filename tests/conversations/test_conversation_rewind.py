"""Rewinding a conversation goes back to a turn: the messages sent after it are not
sent again, the thread is as it was then, and the next message is the next turn."""

from __future__ import annotations

import uuid

from control import conversations, timeline
from worker.main import build_worker


async def test_a_rewind_to_a_turn_drops_the_later_messages(dev_env, settings):
    client, cid = dev_env.client, f"chat-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, settings):
        request = conversations.conversation_request("support-chat", label="chat")
        await conversations.open_conversation(client, settings, request, cid)
        for text in ("first", "second", "third"):
            await conversations.send(client, cid, conversations.message(text, by="jane"))
        found = await timeline.rebuild(client, cid, states=False)
        first_reply = next(
            m for m in found.moments if m.kind == "replied" and m.detail.startswith("turn 1:")
        )
        await timeline.rewind(client, cid, first_reply.index, by="jane")
        after = await conversations.send(client, cid, conversations.message("again", by="jane"))
        view = await conversations.thread(client, cid)
    assert (after.turn, after.reply) == (2, "You said: again")
    assert [t.message for t in view.turns] == ["first", "again"]
    assert view.turns_total == 2 and not view.queued
