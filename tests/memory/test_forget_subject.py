"""Forgetting a subject removes every copy kept outside Temporal: jane's memories, the
stored transcripts and live logs of her closed runs that used them (pruned: nothing acts
for them again) and the what-if reports naming those runs. Her open run keeps its copies
and is named; bob's runs and memories are untouched; what stays is said."""

from __future__ import annotations

import uuid

import pytest

from durable_agents.activities.stores import Stores
from durable_agents.activities.whatif_reports import WhatIfReports
from durable_agents.control import conversations, memory, runs
from durable_agents.worker.main import build_worker
from durable_agents.workflows.people_inputs import Actor


async def chat(client, settings, who: str, text: str) -> tuple[str, str]:
    """A conversation about `who` that says `text`; its id and store key."""
    cid = f"chat-{uuid.uuid4().hex[:8]}"
    request = conversations.conversation_request(
        "support-chat", label="chat", subject={"customer": who}
    )
    await conversations.open_conversation(client, settings, request, cid)
    await conversations.send(client, cid, conversations.message(text, by=who))
    return cid, (await runs.get_state(client, cid)).store_key


async def test_forgetting_jane_clears_her_closed_runs_copies_and_says_what_stays(dev_env, settings):
    client = dev_env.client
    jane, bob = f"jane{uuid.uuid4().hex[:6]}", f"bob{uuid.uuid4().hex[:6]}"
    stores = Stores.open(settings)
    async with build_worker(client, settings):
        told, told_key = await chat(client, settings, jane, "Please remember that I prefer email")
        asked, asked_key = await chat(client, settings, jane, "What do you know about email?")
        _, still_key = await chat(client, settings, jane, "What do you know about email?")
        _, bobs_key = await chat(client, settings, bob, "Please remember that I prefer post")
        for closing in (told, asked):
            await conversations.close(client, closing, Actor(by=jane))
            await runs.wait_for_outcome(client, closing)
        reports = WhatIfReports(stores.db)
        reports.save("report-jane", "a prompt", {"runs": [{"run_id": asked}]})
        reports.save("report-other", "a prompt", {"runs": [{"run_id": f"{asked}x"}]})
        assert "I prefer email" in str(stores.transcript.read(asked_key))
        # A run this namespace of Temporal does not know (another's, or forgotten by its
        # retention): kept, never taken for closed.
        ghost = f"ghost-{uuid.uuid4().hex[:6]}@first"
        stores.memory.note_reader(f"customer/{jane}", ghost)

        report = await memory.forget_subject(client, settings, f"customer/{jane}")

    assert len(report.memories) == 1 and memory.listing(settings, f"customer/{jane}") == []
    assert sorted(report.runs_cleared) == sorted([told_key, asked_key])
    assert sorted(report.runs_open) == sorted([still_key, ghost])
    assert not stores.ledger.pruned(ghost)
    assert report.whatif_reports == ["report-jane"]
    for cleared in (told_key, asked_key):
        assert stores.transcript.read(cleared) == [] and stores.ledger.pruned(cleared)
    assert stores.transcript.read(still_key) != []  # open: its next turn reads it
    assert reports.load("report-jane") is None and reports.load("report-other") is not None
    assert stores.transcript.read(bobs_key) != []
    assert [m.text for m in memory.listing(settings, f"customer/{bob}")] == ["I prefer post"]
    said = report.said(f"customer/{jane}")
    assert "2 runs open or unknown here keep theirs" in said
    assert "What stays: Temporal's history of each run" in said


async def test_forgetting_while_temporal_cannot_answer_removes_nothing(settings, tmp_path):
    """Which runs are closed is asked first: a Temporal that went away leaves the memories
    and every run's copies as they were, and says so in one line."""
    from durable_agents.control.runs import RunError
    from tests.temporal_cli import own_dev_server

    stores = Stores.open(settings)
    stores.memory.remember("customer/zoe", "Zoe likes jazz", {}, key="k1", run_id="r@1", step=1)
    stores.memory.note_reader("customer/zoe", "r@1")
    async with own_dev_server() as gone_soon:
        client = gone_soon.client
    with pytest.raises(RunError, match="cannot ask Temporal about run r"):
        await memory.forget_subject(client, settings, "customer/zoe")
    assert [m.text for m in memory.listing(settings, "customer/zoe")] == ["Zoe likes jazz"]
    assert stores.memory.readers("customer/zoe") == ["r@1"]
