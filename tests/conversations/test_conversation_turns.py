"""Conversations on the time-skipping server, through the public testing kit: turns in
order, a turn that stops for an approval, the thread, closing, and the inputs refused."""

from __future__ import annotations

import asyncio

import pytest

from durable_agents.control.runs import RunError
from durable_agents.testing import AgentTestbed, ScriptedModel, ScriptRefused, call, say
from tests.agents.support_desk import refunds, support_desk
from tests.conftest import eventually


async def _at_least(count_of, wanted: int) -> bool:
    count: int = await count_of()
    return count >= wanted


async def test_each_message_is_answered_by_a_turn_in_order(time_env):
    model = ScriptedModel([say("Hello Jane."), say("Order A-1001 ships today.")])
    async with AgentTestbed(support_desk, model=model, env=time_env) as bed:
        chat = await bed.open_conversation(support_desk, "chat-order")
        first = await chat.send("Hi", by="jane")
        second = await chat.send("Where is my order?", by="jane")
        thread = await chat.thread()
        await chat.close(by="jane")
        result = await chat.result()
    assert (first.status, first.turn, first.reply) == ("answered", 1, "Hello Jane.")
    assert (second.turn, second.reply) == (2, "Order A-1001 ships today.")
    assert [(t.turn, t.by, t.message, t.reply) for t in thread.turns] == [
        (1, "jane", "Hi", "Hello Jane."),
        (2, "jane", "Where is my order?", "Order A-1001 ships today."),
    ]
    assert result.status == "completed" and "after 2 turns" in (result.final_answer or "")
    # The model saw the thread: the second turn's request holds the first exchange.
    contents = [m.get("content") for m in model.requests[1].messages]
    assert contents[-3:] == ["Hi", "Hello Jane.", "Where is my order?"]
    # Replies a person waits on are streamed, word by word, and add up to the reply.
    assert ["".join(p) for p in model.streamed] == ["Hello Jane.", "Order A-1001 ships today."]


async def test_a_turn_that_needs_an_approval_says_so_then_replies(time_env):
    model = ScriptedModel(
        [call("refund_order", order_id="A-1001", amount="20.00"), say("Refunded 20.00.")]
    )
    async with AgentTestbed(support_desk, model=model, env=time_env) as bed:
        chat = await bed.open_conversation(support_desk, "chat-refund")
        waiting = await chat.send("Refund A-1001", by="jane")
        assert waiting.status == "waiting" and "approval of refund_order" in waiting.waiting_for
        request = await chat.next_approval()
        await chat.approve(request.request_id, by="support-lead")
        done = await chat.reply(waiting.message_id)
        made = refunds(bed.data_dir, "chat-refund")
    assert (done.status, done.reply) == ("answered", "Refunded 20.00.")
    assert len(made) == 1 and made[0]["detail"] == {"order_id": "A-1001", "amount": "20.00"}


async def test_messages_sent_during_a_turn_wait_their_turn_in_order(time_env):
    model = ScriptedModel(
        [call("refund_order", order_id="A-1001", amount="5.00"), say("one"), say("two"), say("3")]
    )
    async with AgentTestbed(support_desk, model=model, env=time_env) as bed:
        chat = await bed.open_conversation(support_desk, "chat-queue")
        first = await chat.send("first", by="jane")  # stops for an approval

        async def queued() -> int:
            return len((await chat.thread()).queued)

        sends = []
        for count, text in ((2, "second"), (3, "third")):
            sends.append(asyncio.create_task(chat.send(text, by="jane", message_id=f"m-{text}")))
            # Accepted (queued behind the waiting turn) before the next is sent.
            await eventually(lambda count=count: _at_least(queued, count))
        await chat.approve(by="support-lead")
        second, third = await asyncio.gather(*sends)
        # The same message sent again is the same turn, not a new one.
        again = await chat.send("second", by="jane", message_id="m-second")
        thread = await chat.thread()
    assert (await_first := first.status) == "waiting", await_first
    assert [(r.turn, r.reply) for r in (second, third, again)] == [
        (2, "two"),
        (3, "3"),
        (2, "two"),
    ]
    assert [t.message for t in thread.turns] == ["first", "second", "third"]


async def test_what_a_conversation_refuses(time_env):
    async with AgentTestbed(support_desk, model=ScriptedModel([say("ok")]), env=time_env) as bed:
        run = await bed.start(support_desk, "Look up A-1001")
        with pytest.raises(RunError, match="is not a conversation"):
            await bed.client.conversation(run.run_id).send("hi", by="jane")
        chat = await bed.open_conversation(support_desk, "chat-refusals")
        with pytest.raises(RunError, match="invalid message: text"):
            await chat.send("", by="jane")
        with pytest.raises(RunError, match="no message 'nope'"):
            await chat.reply("nope")
        await chat.close(by="jane")
        assert (await chat.result()).status == "completed"
        with pytest.raises(RunError):
            await chat.send("too late", by="jane")


async def test_a_mistyped_scripted_call_fails_the_test_unless_expected(time_env):
    mistyped = ScriptedModel([call("look_up_order", order="A-1001"), say("?")])
    with pytest.raises(ScriptRefused, match="invalid arguments for look_up_order"):
        async with AgentTestbed(support_desk, model=mistyped, env=time_env) as bed:
            await (await bed.start(support_desk, "Look up A-1001")).result()
    meant = ScriptedModel([call("look_up_order", order="A-1001").expecting_refusal(), say("?")])
    async with AgentTestbed(support_desk, model=meant, env=time_env) as bed:
        result = await (await bed.start(support_desk, "Look up A-1001")).result()
    assert result.status == "completed"


async def test_a_planning_agents_complete_step_does_not_end_a_conversations_turn(time_env):
    """complete_step ends a plan's step; in a conversation's turn (a planning agent may
    hold one) it is a tool call like any, and the reply is the next answer without one."""
    from durable_agents import Agent

    planner = Agent(
        name="planning-desk",
        instructions=support_desk.instructions,
        tools=support_desk.tools,
        planning=True,
    )
    model = ScriptedModel([call("complete_step", summary="noted"), say("Here is your answer.")])
    async with AgentTestbed(planner, model=model, env=time_env) as bed:
        chat = await bed.open_conversation(planner, "chat-planner")
        reply = await chat.send("Hi", by="jane")
        await chat.close(by="jane")
    assert (reply.status, reply.reply) == ("answered", "Here is your answer.")
    assert len(model.requests) == 2
