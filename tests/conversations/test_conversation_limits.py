"""What keeps a conversation usable under load or attack: an idle conversation that has
taken many updates continues as new by itself (Temporal refuses updates past 2,000 in one
run); senders waiting on replies never take the update slots a decision needs; a turn the
endpoint refuses fails alone and the conversation goes on."""

from __future__ import annotations

import asyncio

import pytest

from durable_agents.activities.model_client import CallMeta, ModelRefused, ModelReply, ModelRequest
from durable_agents.client import Conversation
from durable_agents.control.runs import RunError
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from durable_agents.workflows.phases import conversation as conversation_phase
from tests.agents.support_desk import support_desk
from tests.conftest import eventually


async def test_an_idle_conversation_continues_as_new_after_many_updates(time_env, monkeypatch):
    monkeypatch.setattr(conversation_phase, "UPDATES_PER_RUN", 6)
    model = ScriptedModel([say("first"), say("second")])
    async with AgentTestbed(support_desk, model=model, env=time_env) as bed:
        chat = await bed.open_conversation(support_desk, "chat-updates")
        first = await chat.send("one", by="jane")
        for _ in range(5):  # anyone may ask for a reply again: each is an update
            assert (await chat.reply(first.message_id)).reply == "first"

        async def moved_on() -> bool:
            return (await chat.state()).chain == 2

        await eventually(moved_on)  # idle, and continued as new all the same
        second = await chat.send("two", by="jane")
    assert (second.turn, second.reply) == (2, "second")


async def test_waiting_senders_leave_room_for_the_person_who_decides(time_env):
    model = ScriptedModel(
        [call("refund_order", order_id="A-1001", amount="5.00"), say("done"), say("later")]
    )
    async with AgentTestbed(support_desk, model=model, env=time_env) as bed:
        chat = await bed.open_conversation(support_desk, "chat-waiters")
        head = await chat.send("refund please", by="jane")
        assert head.status == "waiting"
        behind = await chat.post("and then?", by="jane")  # queued, nobody waits
        waiters = [asyncio.create_task(chat.reply(behind, by=f"watcher-{n}")) for n in range(5)]

        await waiters_reach(chat, 5)
        with pytest.raises(RunError, match="5 senders already wait"):
            await chat.reply(behind, by="watcher-6")  # a sixth: the rest are for deciding
        await chat.approve(by="support-lead")
        replies = await asyncio.gather(*waiters)
    assert {(r.turn, r.reply) for r in replies} == {(2, "later")}


async def test_one_sender_fills_neither_the_queue_nor_the_waits_for_everyone(time_env):
    """Per sender as well as per conversation: jane's fifth queued message and third wait
    are refused, omar's are taken, and every message taken is answered once."""
    says = [say(f"reply {n}") for n in range(1, 6)]
    model = ScriptedModel([call("refund_order", order_id="A-1001", amount="5.00"), *says])
    async with AgentTestbed(support_desk, model=model, env=time_env) as bed:
        chat = await waiting_on_a_refund(bed, "chat-fair")
        janes = [await chat.post(f"jane {n}", by="jane") for n in range(3)]
        with pytest.raises(RunError, match="jane has 4 messages waiting for their turn"):
            await chat.post("jane again", by="jane")
        omars = await chat.post("omar here", by="omar")
        waits = [asyncio.create_task(chat.reply(janes[n], by="jane")) for n in range(2)]

        await waiters_reach(chat, 2)
        with pytest.raises(RunError, match="jane already waits on 2 replies here"):
            await chat.reply(janes[2], by="jane")
        omar_waits = asyncio.create_task(chat.reply(omars, by="omar"))
        await chat.approve(by="support-lead")
        replies = [*await asyncio.gather(*waits), await omar_waits]
        view = await chat.thread()
    assert [r.reply for r in replies] == ["reply 2", "reply 3", "reply 5"]
    assert [t.message for t in view.turns] == [
        "refund please", "jane 0", "jane 1", "jane 2", "omar here",
    ]  # fmt: skip


async def test_a_turn_the_endpoint_refuses_fails_alone(time_env):
    class Picky(ScriptedModel):
        async def complete(self, request: ModelRequest, meta: CallMeta) -> ModelReply:
            if "forbidden" in str(request.messages[-1].get("content")):
                raise ModelRefused("model endpoint refused the request (HTTP 400): too long")
            return await super().complete(request, meta)

    model = Picky([say("fine"), say("still here")])
    async with AgentTestbed(support_desk, model=model, env=time_env) as bed:
        chat = await bed.open_conversation(support_desk, "chat-refused-turn")
        ok = await chat.send("hello", by="jane")
        refused = await chat.send("forbidden words", by="jane")
        after = await chat.send("are you there?", by="jane")
        state = await chat.state()
    assert ok.reply == "fine"
    assert refused.status == "failed" and "HTTP 400" in (refused.error or "")
    assert (after.turn, after.reply) == (3, "still here")
    assert state.status.value == "running"


async def test_a_full_queue_refuses_the_next_message(time_env, monkeypatch):
    from tests.agents.support_desk import support_desk

    monkeypatch.setattr(conversation_phase, "MAX_QUEUED", 3)
    model = ScriptedModel(
        [call("refund_order", order_id="A-1001", amount="5.00"), say("refunded"),
         say("zero"), say("one")]
    )  # fmt: skip
    async with AgentTestbed(support_desk, model=model, env=time_env) as bed:
        chat = await waiting_on_a_refund(bed, "chat-full-queue")
        behind = [await chat.post(f"then {n}", by="jane") for n in range(2)]
        with pytest.raises(RunError, match="3 messages waiting for their turn"):
            await chat.post("one too many", by="jane")
        assert len((await chat.thread()).queued) == 3
        await chat.approve(by="support-lead")
        last = await chat.reply(behind[-1])
        view = await chat.thread()
    assert (last.turn, last.reply) == (3, "one")
    assert [t.message for t in view.turns] == ["refund please", "then 0", "then 1"]


async def waiters_reach(chat: Conversation, count: int) -> None:
    """Until this many senders wait in an update on the conversation (the run says so)."""

    async def reached() -> bool:
        return (await chat.thread()).waiters == count

    await eventually(reached)


async def waiting_on_a_refund(bed: AgentTestbed, conversation_id: str) -> Conversation:
    """A conversation whose first turn (jane's refund) waits for its approval: it holds
    the head of the queue, so what is sent next queues behind it."""
    chat = await bed.open_conversation(support_desk, conversation_id)
    head = await chat.send("refund please", by="jane")
    assert head.status == "waiting"
    return chat
