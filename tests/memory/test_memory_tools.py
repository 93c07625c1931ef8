"""Memory across runs, through the public testing kit: a conversation remembers a
customer's preference, a later one recalls it (and only that customer's), forgetting the
namespace removes it, and a run without a subject is offered no memory tools."""

from __future__ import annotations

import json
from datetime import timedelta

from durable_agents import Agent, Memory
from durable_agents.control import memory
from durable_agents.examples.support_chat import support_chat
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from durable_agents.workflows.memory import MEMORY_TOOLS

JANE = {"customer": "jane"}


def tool_results(model: ScriptedModel) -> list[str]:
    return [
        str(m.get("content")) for r in model.requests for m in r.messages if m.get("role") == "tool"
    ]


async def test_a_preference_is_remembered_recalled_and_forgotten(own_clock):
    recall = [call("recall", query="contact preference email"), say("ok")]
    model = ScriptedModel(
        [],
        runs={
            "chat-jane-1": [
                call("remember", text="Jane prefers email over phone", fields={"channel": "email"}),
                say("Noted: email it is."),
            ],
            "chat-jane-2": recall,
            "chat-omar": recall,
            "chat-jane-3": recall,
        },
    )
    async with AgentTestbed(support_chat, model=model, env=own_clock) as bed:
        first = await bed.open_conversation(support_chat, "chat-jane-1", subject=JANE)
        await first.send("Please contact me by email, not phone.", by="jane")
        await first.close(by="jane")
        kept = memory.listing(bed.settings, "customer/jane")
        await own_clock.sleep(timedelta(days=3))  # the next conversation, days later
        second = await bed.open_conversation(support_chat, "chat-jane-2", subject=JANE)
        await second.send("How should you reach me?", by="jane")
        other = await bed.open_conversation(support_chat, "chat-omar", subject={"customer": "omar"})
        await other.send("How should you reach me?", by="omar")
        removed = memory.forget(bed.settings, "customer/jane")
        third = await bed.open_conversation(support_chat, "chat-jane-3", subject=JANE)
        await third.send("How should you reach me?", by="jane")
    assert [(m.text, m.fields, m.step) for m in kept] == [
        ("Jane prefers email over phone", {"channel": "email"}, 1)
    ]
    assert kept[0].run_id.startswith("chat-jane-1@")  # who wrote it: the run (and step)
    recalled = [json.loads(text) for text in tool_results(model) if '"memories"' in text]
    jane_saw, omar_saw, after_forget = recalled
    assert [m["text"] for m in jane_saw["memories"]] == ["Jane prefers email over phone"]
    assert omar_saw["memories"] == []  # another customer's namespace: nothing of Jane's
    assert removed == [kept[0].memory_id]
    assert after_forget["memories"] == []


async def test_a_run_without_a_subject_is_offered_no_memory(time_env):
    model = ScriptedModel([say("hello")])
    async with AgentTestbed(support_chat, model=model, env=time_env) as bed:
        chat = await bed.open_conversation(support_chat, "chat-anonymous")
        await chat.send("hi", by="someone")
    offered = {t.name for t in model.requests[0].tools}
    assert offered.isdisjoint(MEMORY_TOOLS) and "look_up_order" in offered


def desk_and_helper(shared: bool) -> tuple[Agent, ScriptedModel]:
    """A desk that hands note-taking to a helper with a memory of its own; the desk shares
    its own memory with the helper or not; the model has the helper remember one thing."""
    helper = Agent(
        name="helper",
        instructions="Keep notes.",
        planning=False,
        memory=Memory("helper-notes/{customer}"),
    )
    desk = Agent(
        name="desk",
        instructions="Delegate the notes.",
        planning=False,
        delegates=[helper],
        memory=Memory("customer/{customer}", shared_with_sub_agents=shared),
    )
    model = ScriptedModel(
        [call("ask_helper", task="note Jane's preference"), say("done")],
        agents={"helper": [call("remember", text="Jane likes tea"), say("noted")]},
    )
    return desk, model


async def test_a_sub_agent_shares_its_parents_namespace_only_when_given_by_it(time_env):
    from durable_agents.control import runs
    from durable_agents.workflows.contracts import RunRequest

    desk, model = desk_and_helper(shared=True)
    async with AgentTestbed(desk, model=model, env=time_env) as bed:
        seeded = bed.seed_memory("customer/jane", "Jane was seeded")
        run = await bed.start(desk, "Take a note", subject=JANE)
        assert (await run.result()).status == "completed"
        shared = [m.text for m in bed.memories("customer/jane")]
        own = bed.memories("helper-notes/jane")
        # Naming a namespace from outside (not as the delegating parent) is refused.
        forged = RunRequest(
            goal="read", agent="helper", subject=JANE, memory_namespace="customer/jane"
        )
        started = await runs.start_run(bed.client.temporal, bed.settings, forged, "forged-ns")
        refused = await bed.client.run(started.run_id).result()
    assert shared == ["Jane likes tea", "Jane was seeded"] and seeded.startswith("mem-")
    assert own == []
    assert refused.status == "failed" and "only by the run that delegates" in (refused.error or "")


async def test_what_a_recall_hands_the_model_is_bounded_by_the_worker(time_env):
    model = ScriptedModel([call("recall", query="tea"), say("ok")])
    bed = AgentTestbed(support_chat, model=model, env=time_env)
    bed.settings = bed.settings.model_copy(update={"memory_recall_limit": 2})
    async with bed:
        for i in range(4):
            bed.seed_memory("customer/jane", f"Jane drinks tea number {i}")
        chat = await bed.open_conversation(support_chat, "chat-bounded", subject=JANE)
        await chat.send("What do you know?", by="jane")
    recalled = [json.loads(t) for t in tool_results(model) if '"memories"' in t]
    assert len(recalled[0]["memories"]) == 2  # the agent allows 5; the worker, 2


async def test_a_parent_that_does_not_share_its_memory_keeps_it_from_its_sub_agent(time_env):
    desk, model = desk_and_helper(shared=False)
    async with AgentTestbed(desk, model=model, env=time_env) as bed:
        bed.seed_memory("customer/jane", "Jane was seeded")
        run = await bed.start(desk, "Take a note", subject={"customer": "jane"})
        assert (await run.result()).status == "completed"
        parents = [m.text for m in bed.memories("customer/jane")]
        own = [m.text for m in bed.memories("helper-notes/jane")]
    assert parents == ["Jane was seeded"]  # the helper neither read nor wrote the desk's
    assert own == ["Jane likes tea"]


async def test_a_sub_agent_with_a_memory_of_its_own_takes_its_parents_subject_grant(
    time_env, tmp_path
):
    """Where the deployment says who a run may be about (AGENT_SUBJECT_KEYS), the desk's
    grant for jane, handed down, is what lets its helper keep notes about her."""
    from durable_agents.control.signer import write_new_key
    from durable_agents.runtime.settings import SubjectKeySetting

    public = write_new_key(tmp_path / "ops.key")
    desk, model = desk_and_helper(shared=False)
    bed = AgentTestbed(desk, model=model, env=time_env)
    grants = SubjectKeySetting(public_key=public, namespaces=["customer/*", "helper-notes/*"])
    bed.settings = bed.settings.model_copy(
        update={
            "subject_keys": {"ops": grants},
            "signing_key_file": tmp_path / "ops.key",
            "signing_key_id": "ops",
        }
    )
    async with bed:
        run = await bed.start(desk, "Take a note", subject={"customer": "jane"})
        assert (await run.result()).status == "completed"
        own = [m.text for m in bed.memories("helper-notes/jane")]
    assert own == ["Jane likes tea"]
