"""Memory on the dev server, through the offline model's chat: a worker SIGKILLed at each
instant around a remember (before the write, after it, after the ledger's record) leaves
exactly one memory; and a run that recalled replays to the same state after the memories
changed (the recall is in its history, never read again)."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid

import pytest

from durable_agents.control import conversations, memory, timeline
from durable_agents.infra.stack import worker_polling
from durable_agents.worker.main import build_worker
from durable_agents.workflows.people_inputs import Actor
from tests.conftest import eventually, spawn_worker

JANE = {"customer": "jane"}


async def open_chat(client, settings, subject: dict[str, str]) -> str:
    cid = f"chat-{uuid.uuid4().hex[:8]}"
    request = conversations.conversation_request("support-chat", label="chat", subject=subject)
    await conversations.open_conversation(client, settings, request, cid)
    return cid


@pytest.mark.parametrize("instant", ["before_provider", "after_provider", "after_ledger"])
async def test_a_crash_at_each_instant_of_a_remember_leaves_one_memory(
    dev_env, settings, tmp_path, instant
):
    client = dev_env.client
    subject = {"customer": f"c{uuid.uuid4().hex[:8]}"}
    doomed = spawn_worker(settings, tmp_path / "w1.log", AGENT_CRASH_AT=f"{instant}:remember")
    try:
        await eventually(lambda: worker_polling(settings), within=30)
        cid = await open_chat(client, settings, subject)
        sent = conversations.message("Please remember that I prefer email", by="jane")
        await conversations.post(client, cid, sent)
        code = await asyncio.to_thread(doomed.wait, 60)
    finally:
        if doomed.poll() is None:
            doomed.kill()
    assert code == -signal.SIGKILL, "the fault hook must have killed the worker"
    rescuer = spawn_worker(settings, tmp_path / "w2.log")
    try:
        reply = await conversations.await_reply(client, cid, sent.message_id)
    finally:
        rescuer.send_signal(signal.SIGTERM)
        await asyncio.to_thread(rescuer.wait, 30)
    kept = memory.listing(settings, f"customer/{subject['customer']}")
    assert reply.status == "answered" and reply.reply.startswith("Done: ")
    assert [m.text for m in kept] == ["I prefer email"]


async def test_a_replay_sees_what_the_run_recalled_after_the_memories_changed(dev_env, settings):
    client = dev_env.client
    async with build_worker(client, settings):
        first = await open_chat(client, settings, JANE)
        await conversations.send(
            client, first, conversations.message("Remember that I like tea", by="jane")
        )
        second = await open_chat(client, settings, JANE)
        asked = conversations.message("What do you know about tea?", by="jane")
        answer = await conversations.send(client, second, asked)
        before = await timeline.rebuild(client, second)
        memory.forget(settings, "customer/jane")  # the memories change after the run
        after = await timeline.rebuild(client, second)
    assert "I like tea" in answer.reply
    last = before.moments[-1].state.model_dump(mode="json")
    assert after.moments[-1].state.model_dump(mode="json") == last
    recalled = [r for r in before.moments[-1].state.results if r.tool == "recall"]
    assert recalled and "I like tea" in recalled[0].summary
    assert memory.listing(settings, "customer/jane") == []
    assert json.dumps(last)  # the rebuilt state is plain JSON


async def test_remembered_recalled_then_forgotten_from_the_cli(dev_env, settings):
    """The acceptance, as a person types it: one conversation remembers a preference, a
    second (another id) recalls it, `agentctl memory forget` removes it and says so, and
    a third does not find it."""
    from tests.starters.test_cli_chat import agentctl

    who = f"c{uuid.uuid4().hex[:8]}"
    about = ["--subject", f"customer={who}", "--as", who]
    async with build_worker(dev_env.client, settings):
        code, said, err = await agentctl(
            settings, "chat", "support-chat", *about, "-m", "Remember that I prefer email"
        )
        assert code == 0, err
        code, found, err = await agentctl(
            settings, "chat", "support-chat", *about, "-m", "What do you know about email?"
        )
        assert code == 0, err
        code, listed, err = await agentctl(settings, "memory", "list", f"customer/{who}")
        assert code == 0, err
        code, forgot, err = await agentctl(settings, "memory", "forget", f"customer/{who}")
        assert code == 0, err
        code, after, err = await agentctl(
            settings, "chat", "support-chat", *about, "-m", "What do you know about email?"
        )
        assert code == 0, err
        code, _, err = await agentctl(
            settings, "chat", "support-chat", "--subject", "customer", "-m", "x"
        )
    assert '"memory_id"' in said  # the remember's result, told back
    assert "I prefer email" in found
    assert "I prefer email" in listed and "step 1" in listed
    assert forgot.startswith(f"forgot 1 memories of customer/{who}; ") and "What stays: " in forgot
    assert '"memories": []' in after
    assert code == 1 and "--subject takes KEY=VALUE" in err


async def test_forks_and_rewinds_never_duplicate_a_memory(dev_env, settings):
    """A fork made after the remember keeps the memory as it is; a fork from before it
    remembers under its own key (its own memory, once); a rewind to before it finds the
    ledger's answer and writes nothing again."""
    client = dev_env.client
    who = f"c{uuid.uuid4().hex[:8]}"
    namespace = f"customer/{who}"
    async with build_worker(client, settings):
        cid = await open_chat(client, settings, {"customer": who})
        told = conversations.message("Remember that I like tea", by="jane")
        await conversations.send(client, cid, told)
        found = await timeline.rebuild(client, cid, states=False)
        began = next(m for m in found.moments if m.kind == "message")
        replied = next(m for m in found.moments if m.kind == "replied")
        after = await timeline.fork(client, settings, cid, replied.index)
        before = await timeline.fork(client, settings, cid, began.index)
        for fork in (after, before):
            await conversations.close(client, fork.run_id, Actor(by="t"))
        await client.get_workflow_handle(before.run_id).result()
        once = [(m.text, m.run_id.split("@")[0]) for m in memory.listing(settings, namespace)]
        await timeline.rewind(client, cid, began.index, by="ops")
        again = await conversations.await_reply(client, cid, told.message_id)
        twice = memory.listing(settings, namespace)
    assert sorted(once) == sorted([("I like tea", cid), ("I like tea", before.run_id)])
    assert again.status == "answered" and len(twice) == 2


async def test_memories_searched_by_meaning_use_the_endpoints_embeddings(
    dev_env, settings, model_server
):
    """Memory(search="embeddings"): each memory's vector comes from the endpoint (the
    offline model's deterministic embeddings here), sealed beside its text, and a recall
    ranks by cosine; the history keeps what it found, as for the word search."""
    import urllib.request

    from durable_agents import Agent, Memory
    from durable_agents.examples.support_chat import look_up_order
    from durable_agents.workflows.registry import AgentRegistry

    agent = Agent(
        name="support-embed",
        instructions="Remember what customers prefer.",
        tools=[look_up_order],
        planning=False,
        memory=Memory("customer/{customer}", search="embeddings"),
    )
    client, who = dev_env.client, f"c{uuid.uuid4().hex[:8]}"

    def embedded() -> int:
        with urllib.request.urlopen(f"{model_server.base_url}/scripted/stats") as response:
            return int(json.loads(response.read())["totals"].get("embeddings", 0))

    before = await asyncio.to_thread(embedded)
    async with build_worker(client, settings, registry=AgentRegistry().add(agent)):
        request = conversations.conversation_request(
            "support-embed", label="chat", subject={"customer": who}
        )
        cid = f"chat-{uuid.uuid4().hex[:8]}"
        await conversations.open_conversation(client, settings, request, cid)
        for fact in ("green tea in the morning", "parcels left at the door"):
            said = conversations.message(f"Remember that I like {fact}", by="jo")
            await conversations.send(client, cid, said)
        asked = conversations.message("What do you know about tea?", by="jo")
        found = await conversations.send(client, cid, asked)
    vectors = memory.memory_store(settings).db.query(
        "SELECT vector FROM memories WHERE namespace = ?", (f"customer/{who}",)
    )
    assert len(vectors) == 2 and all(row["vector"] for row in vectors)
    assert await asyncio.to_thread(embedded) - before == 3  # two memories, one query
    recalled = json.loads(found.reply.removeprefix("Done: "))["memories"]
    assert recalled[0]["text"] == "I like green tea in the morning"


async def test_a_fork_takes_its_parents_memory_whatever_its_request_says(dev_env, settings):
    """A fork's state comes from its request; its memory namespace and subject do not:
    they are the parent's, as the parent itself says (a forged one reads nothing)."""
    from durable_agents.control import runs
    from durable_agents.workflows.contracts import ForkSpec, RunRequest

    client = dev_env.client
    async with build_worker(client, settings):
        cid = await open_chat(client, settings, {"customer": "alice"})
        await conversations.send(client, cid, conversations.message("hi", by="alice"))
        found = await timeline.rebuild(client, cid, only=None)
        moment = next(m for m in found.moments if m.kind == "replied")
        state = moment.state.model_dump(mode="json")
        state["memory_namespace"], state["subject"] = "customer/victim", {"customer": "victim"}
        forged = RunRequest(
            goal=moment.state.goal,
            label="chat",
            agent="support-chat",
            policy=moment.state.policy,
            conversation=True,
            fork=ForkSpec(parent_run_id=cid, state=state),
        )
        started = await runs.start_run(client, settings, forged, f"{cid}-forged")
        await conversations.send(client, started.run_id, conversations.message("again", by="alice"))
        fork_state = await runs.get_state(client, started.run_id)
    assert fork_state.memory_namespace == "customer/alice"
    assert fork_state.subject == {"customer": "alice"}
