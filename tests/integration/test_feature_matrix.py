"""Features compose (invariant 10): every verb, through the client-side functions the CLI
calls, on {plain, encrypted} x {SQLite, PostgreSQL}."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from durable_agents.control import conversations, doctor, pruning, runs, stored, timeline
from durable_agents.control.live import LiveReplies, shown
from durable_agents.runtime.client import connect
from durable_agents.runtime.encryption import new_key
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor, Answer, DecideRequest, StatePatch
from durable_agents.workflows.records import RunStatus
from tests.conftest import drop_schema, eventually, postgres_or_skip, run_id, settings_for


def moment_of(found, kind):
    return next(m for m in found.moments if m.kind == kind)


async def waiting(client, rid, status: RunStatus):
    async def reached():
        return (await runs.get_state(client, rid)).status is status

    await eventually(reached)


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_every_verb_with_every_feature(dev_env, model_server, tmp_path, store, encrypted):
    settings = settings_for(dev_env.client, tmp_path / "data", model_server.port)
    schema = None
    if store == "postgres":
        schema = f"m_{run_id('s').replace('-', '_')}"
        update = {"database_url": postgres_or_skip(), "database_schema": schema}
        settings = settings.model_copy(update=update)
    if encrypted:
        settings = settings.model_copy(update={"encryption_keys": SecretStr(f"k1={new_key()}")})
    client = await connect(settings)
    try:
        async with build_worker(await connect(settings, for_worker=True), settings):
            await every_verb(client, settings, tmp_path)
            await a_conversation(client, settings, tmp_path)
    finally:
        if schema is not None:
            drop_schema(settings.database_url or "", schema)


async def every_verb(client, settings, tmp_path) -> None:
    pay, ask, stop = run_id("pay"), run_id("ask"), run_id("stop")
    await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), pay)
    await runs.start_run(client, settings, RunRequest(goal="ask", label="ask-human"), ask)
    await runs.start_run(client, settings, RunRequest(goal="stop", label="pay-invoice"), stop)

    # inbox, pause/resume, edit, approve, answer, cancel
    await waiting(client, pay, RunStatus.AWAITING_APPROVAL)
    await waiting(client, ask, RunStatus.AWAITING_INPUT)
    inbox = {item.run_id: item for item in await runs.inbox(client)}
    assert "pay_invoice" in inbox[pay].detail and "question" in inbox[ask].detail
    await runs.pause(client, pay, Actor(by="ops"))
    await eventually(lambda: _pause_requested(client, pay))
    await runs.resume(client, pay, Actor(by="ops"))
    edited = await runs.edit(client, pay, StatePatch(by="ed", context=["matrix"]))
    assert edited.context == ["matrix"] and not edited.pause_requested
    said = await runs.decide(client, pay, DecideRequest(approve=True, by="alice"))
    assert said.startswith("approved: pay_invoice")
    assert (await runs.answer(client, ask, Answer(answer="INV-1001", by="bob"))).startswith(
        "answered"
    )
    await waiting(client, stop, RunStatus.AWAITING_APPROVAL)
    await runs.cancel(client, stop, Actor(by="ops"))
    assert (await runs.wait_for_outcome(client, stop))["status"] == "cancelled"
    assert (await runs.wait_result(client, pay)).status == "completed"
    assert (await runs.wait_result(client, ask)).status == "completed"

    # effects from our ledger; the timeline's texts from our transcript
    effects = await stored.run_effects(client, settings, pay)
    assert [e["tool"] for e in effects] == ["draft_email", "pay_invoice", "send_email"]
    found = await timeline.rebuild(client, pay)
    asked = moment_of(found, "approval requested")
    assert found.at(asked.index).state.status is RunStatus.AWAITING_APPROVAL
    assert timeline.diff(
        timeline.flatten(found.at(asked.index - 1).state.model_dump(mode="json")),
        timeline.flatten(found.at(asked.index).state.model_dump(mode="json")),
    )
    messages = stored.transcript_store(settings).read(found.moments[-1].state.store_key)
    assert messages[0]["content"].startswith("Goal: pay")

    # export / replay, through the client's codec
    exported = tmp_path / "pay.json"
    timeline.export_history(await timeline.fetch_history(client, pay), exported)
    [replayed] = await timeline.replay_files([exported], client.data_converter)
    assert replayed.ok, replayed.message

    # fork before the payment, rewind past it: each pays once under its own identity
    child = await timeline.fork(client, settings, pay, asked.index, new_id=f"{pay}-fork")
    await waiting(client, child.run_id, RunStatus.AWAITING_APPROVAL)
    await runs.decide(client, child.run_id, DecideRequest(approve=True, by="alice"))
    assert (await runs.wait_result(client, child.run_id)).status == "completed"
    forked = await stored.run_effects(client, settings, child.run_id)
    assert [e["tool"] for e in forked] == ["pay_invoice", "send_email"]
    await timeline.rewind(client, pay, asked.index, by="ops")
    assert (await runs.wait_result(client, pay)).status == "completed"
    after = await stored.run_effects(client, settings, pay)
    assert [e["idempotency_key"] for e in after] == [e["idempotency_key"] for e in effects]

    # prune (nothing old enough) and doctor
    report = await pruning.prune(client, settings, "30d", dry_run=True)
    assert report.pruned == [] and report.kept_recent >= 4
    findings = {f.part: f for f in await doctor.diagnose(settings, {"temporal", "stores"})}
    assert all(f.ok for f in findings.values()), findings
    if settings.encryption_on:  # the keys work; no codec server runs in this test
        assert "on (key 'k1')" in (await doctor.diagnose(settings, {"encryption"}))[0].says


async def a_conversation(client, settings, tmp_path) -> None:
    """A conversation with every feature: its streamed reply readable from the live log,
    its turn's approval, the whole thread from the transcript, replay, fork, close."""
    cid = run_id("chat")
    request = conversations.conversation_request("support-chat", label="chat")
    await conversations.open_conversation(client, settings, request, cid)
    hello = await conversations.send(client, cid, conversations.message("hi", by="jo"))
    asked = conversations.message("Please refund A-1001 20.00", by="jo")
    waiting_reply = await conversations.send(client, cid, asked)
    assert waiting_reply.status == "waiting"
    await runs.decide(client, cid, DecideRequest(approve=True, by="support-lead"))
    refunded = await conversations.await_reply(client, cid, asked.message_id)
    assert hello.reply == "You said: hi" and refunded.reply.startswith("Done: ")
    live = LiveReplies(settings)
    try:
        texts = list(shown(await live.after(cid, 0, wait=0)).values())
    finally:
        await live.close()
    assert texts[0] == hello.reply and texts[-1] == refunded.reply
    whole = await conversations.whole_thread(client, settings, cid)
    assert [(line.speaker, line.text) for line in whole][:2] == [
        ("jo", "hi"),
        ("agent", hello.reply),
    ]
    exported = tmp_path / f"{cid}.json"
    timeline.export_history(await timeline.fetch_history(client, cid), exported)
    [replayed] = await timeline.replay_files([exported], client.data_converter)
    assert replayed.ok, replayed.message
    found = await timeline.rebuild(client, cid, states=False)
    first = next(m for m in found.moments if m.kind == "replied")
    fork = await timeline.fork(client, settings, cid, first.index, new_id=f"{cid}-fork")
    again = await conversations.send(client, fork.run_id, conversations.message("b", by="jo"))
    assert (again.turn, again.reply) == (2, "You said: b")
    for each in (cid, fork.run_id):
        await conversations.close(client, each, Actor(by="jo"))
        assert (await runs.wait_result(client, each)).status == "completed"


async def _pause_requested(client, rid) -> bool:
    return (await runs.get_state(client, rid)).pause_requested
