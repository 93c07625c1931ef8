"""An idle conversation leaves the worker's cache like any waiting run, and its next
message brings it back by replaying its history (updates, turns and all)."""

from __future__ import annotations

import uuid

from durable_agents.control import conversations
from durable_agents.worker.main import build_worker


async def test_conversations_evicted_between_messages_answer_on(dev_env, settings):
    client = dev_env.client
    one_cached = settings.model_copy(update={"workflow_cache_size": 1})
    ids = [f"chat-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    async with build_worker(client, one_cached):
        request = conversations.conversation_request("support-chat", label="chat")
        for cid in ids:
            await conversations.open_conversation(client, one_cached, request, cid)
        replies = []
        for round_ in range(3):  # each message finds its conversation evicted by another
            for cid in ids:
                said = conversations.message(f"{cid} round {round_}", by="jo")
                replies.append(await conversations.send(client, cid, said))
        views = [await conversations.thread(client, cid) for cid in ids]
    assert [r.reply for r in replies] == [
        f"You said: {cid} round {round_}" for round_ in range(3) for cid in ids
    ]
    assert [v.turns_total for v in views] == [3, 3, 3]
