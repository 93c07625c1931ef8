"""A conversation that lasts: fifty turns over three simulated days, one stopping for an
approval, continued as new along the way without losing or repeating a message; its
history per turn stays flat, its whole thread reads back, and it forks at turn 20.

On a time-skipping server of its own: the days skipped here must not move the clock of
the tests sharing the session's server (signatures there are checked against it)."""

from __future__ import annotations

import asyncio
import statistics
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from durable_agents.client import Conversation
from durable_agents.control import conversations, timeline
from durable_agents.examples.support_chat import support_chat
from durable_agents.testing import AgentTestbed, ScriptedModel, Turn, call, say
from durable_agents.workflows.contracts import RunLimits
from tests.conftest import count_effects, eventually

TURNS = 50
APPROVAL_TURN = 7
# A continue-as-new every few turns: the chain, not one run, holds the conversation.
LIMITS = RunLimits(continue_as_new_after_events=150)


def script() -> list[Turn]:
    turns: list[Turn] = []
    for i in range(1, TURNS + 1):
        if i == APPROVAL_TURN:
            turns.append(call("refund_order", order_id="A-1001", amount="7.00"))
        turns.append(say(f"reply {i}"))
    return turns


async def chat_key(bed: AgentTestbed, cid: str) -> str:
    return (await bed.client.conversation(cid).state()).store_key


async def history_size(env: WorkflowEnvironment, cid: str) -> tuple[str, int]:
    described = await env.client.get_workflow_handle(cid).describe()
    info = described.raw_description.workflow_execution_info
    return described.run_id, info.history_size_bytes


async def test_fifty_turns_over_three_days(own_clock):
    cid = "chat-long"
    async with AgentTestbed(support_chat, model=ScriptedModel(script()), env=own_clock) as bed:
        chat = await bed.open_conversation(support_chat, cid, limits=LIMITS)
        per_turn: list[int] = []
        runs_seen: set[str] = set()
        last = await history_size(own_clock, cid)
        for i in range(1, TURNS + 1):
            reply = await chat.send(f"message {i}", by="jane")
            if i == APPROVAL_TURN:
                assert reply.status == "waiting" and "refund_order" in reply.waiting_for
                await chat.approve(by="support-lead")
                reply = await chat.reply(reply.message_id)
            assert (reply.status, reply.turn, reply.reply) == ("answered", i, f"reply {i}")
            now = await history_size(own_clock, cid)
            runs_seen.add(now[0])
            if now[0] == last[0] and i != APPROVAL_TURN:
                per_turn.append(now[1] - last[1])
            last = now
            await own_clock.sleep(timedelta(hours=1.5))  # 75 hours in all
        whole = await conversations.whole_thread(bed.client.temporal, bed.settings, cid)
        state = await chat.state()
        made = count_effects(bed.settings, await chat_key(bed, cid), "refund")

        found = await timeline.rebuild(bed.client.temporal, cid, states=False)
        turn_20 = next(m for m in found.moments if m.kind == "replied" and "turn 20:" in m.detail)
        forked = await timeline.fork(bed.client.temporal, bed.settings, cid, turn_20.index)
        fork = bed.client.conversation(forked.run_id)
        fork_reply = await fork.send("And now?", by="omar")
        fork_thread = await fork.thread()
        await chat.close(by="jane")
        result = await chat.result()

    assert len(runs_seen) >= 3, "the conversation must have continued as new"
    assert state.chain >= 3 and state.conversation and state.conversation.turns_total == TURNS
    # Flat: a turn late in the conversation costs the history what an early one did.
    early, late = statistics.median(per_turn[:8]), statistics.median(per_turn[-8:])
    assert late <= early * 1.1, (early, late, per_turn)
    # The whole thread, from the transcript store: every message and every reply.
    assert [(line.speaker, line.text) for line in whole[:2]] == [
        ("jane", "message 1"),
        ("agent", "reply 1"),
    ]
    assert len(whole) == 2 * TURNS and whole[-1].text == f"reply {TURNS}"
    assert made == 1  # the approved refund, once
    # The fork goes on from turn 20: its next message is turn 21, the original untouched.
    assert fork_reply.turn == 21 and fork_thread.turns_total == 21
    assert fork_thread.turns[-1].by == "omar"
    assert result.status == "completed" and f"after {TURNS} turns" in (result.final_answer or "")


async def test_messages_queued_across_a_continue_as_new_are_each_answered_once(
    own_clock, monkeypatch
):
    first_heard: list[str] = []
    asked_again = conversations._past_carried

    async def noting(client, run_id, reply, by, signer):  # what each heard from the first run
        first_heard.append(reply.status)
        return await asked_again(client, run_id, reply, by, signer)

    monkeypatch.setattr(conversations, "_past_carried", noting)
    refund = call("refund_order", order_id="A-1001", amount="7.00")
    model = ScriptedModel([refund, *(say(f"answer {i}") for i in range(1, 9))])
    async with AgentTestbed(support_chat, model=model, env=own_clock) as bed:
        often = RunLimits(continue_as_new_after_events=50)
        chat = await bed.open_conversation(support_chat, "chat-carried", limits=often)
        # The first turn stops for an approval: the others queue behind it, by construction.
        first = await chat.send("q1", by="jane", message_id="q-1")
        assert first.status == "waiting"
        waiting, posted = [], []
        for i in range(2, 9):
            if i % 2:  # these senders wait in an update; the others post and ask later
                waiting.append(
                    asyncio.create_task(chat.send(f"q{i}", by=f"guest-{i}", message_id=f"q-{i}"))
                )
            else:
                posted.append(await chat.post(f"q{i}", by=f"guest-{i}", message_id=f"q-{i}"))
            # Each accepted before the next is sent: their order is the order sent.
            await eventually(lambda i=i: _accepted(chat, f"q-{i}"))
        await chat.approve(by="support-lead")
        replies = [await chat.reply("q-1"), *await asyncio.gather(*waiting)]
        replies += [await chat.reply(message_id) for message_id in posted]
        state = await chat.state()
    by_turn = sorted((r.turn, r.reply) for r in replies)
    assert by_turn == [(i, f"answer {i}") for i in range(1, 9)]
    assert state.chain >= 2, "the queue must have crossed a continue-as-new"
    # Senders waiting when it did heard `carried` and asked the fresh run for their reply.
    assert "carried" in first_heard, first_heard
    asked = [m.get("content") for r in model.requests for m in r.messages[-1:]]
    assert [q for q in asked if str(q).startswith("q")] == [f"q{i}" for i in range(1, 9)]


async def _accepted(chat: Conversation, message_id: str) -> bool:
    view = await chat.thread()
    return any(m.message_id == message_id for m in view.queued) or any(
        t.message_id == message_id for t in view.turns
    )
