"""Rewinding a conversation goes back to a turn: the messages sent after it are not
sent again, the thread is as it was then, and the next message is the next turn, whose
effects are its own even where the model numbers its calls as it did before."""

from __future__ import annotations

import uuid

from durable_agents.control import conversations, runs, timeline
from durable_agents.worker.main import build_worker
from durable_agents.workflows.people_inputs import DecideRequest
from tests.conftest import count_effects

LEAD = DecideRequest(approve=True, by="support-lead")


async def refund(client, cid: str) -> str:
    asked = conversations.message("Please refund A-1001 5.00", by="jane")
    waiting = await conversations.send(client, cid, asked)
    assert waiting.status == "waiting", waiting
    await runs.decide(client, cid, LEAD)
    return (await conversations.await_reply(client, cid, asked.message_id)).reply


async def test_a_rewind_to_a_turn_drops_the_later_messages(dev_env, settings):
    client, cid = dev_env.client, f"chat-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, settings):
        request = conversations.conversation_request("support-chat", label="chat")
        await conversations.open_conversation(client, settings, request, cid)
        await conversations.send(client, cid, conversations.message("first", by="jane"))
        assert (await refund(client, cid)).startswith("Done: ")
        await conversations.send(client, cid, conversations.message("third", by="jane"))
        found = await timeline.rebuild(client, cid, states=False)
        first_reply = next(
            m for m in found.moments if m.kind == "replied" and m.detail.startswith("turn 1:")
        )
        await timeline.rewind(client, cid, first_reply.index, by="jane")
        # Turn 2 again, the same request, and the model's call numbered as the first time:
        # a new refund all the same (the person asked again), not the old one's result.
        again = await refund(client, cid)
        view = await conversations.thread(client, cid)
        key = (await runs.get_state(client, cid)).store_key
    assert again.startswith("Done: ")
    assert [t.message for t in view.turns] == ["first", "Please refund A-1001 5.00"]
    assert view.turns_total == 2 and not view.queued
    assert count_effects(settings, key, "refund") == 2
