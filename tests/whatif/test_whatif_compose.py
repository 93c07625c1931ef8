"""What if, with the rest of the product: a conversation played again turn by turn, a
delegation whose child is played again as a shadow too (its MCP side effect recorded, the
knowledge base untouched), and an encrypted stack on PostgreSQL read from an exported
history file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from durable_agents.client import AgentClient
from durable_agents.control import pruning, runs, timeline, whatif
from durable_agents.examples.support_chat import look_up_order
from durable_agents.infra.offline_model.embedded import EmbeddedModelServer
from durable_agents.runtime.client import connect
from durable_agents.runtime.encryption import new_key
from durable_agents.runtime.settings import Settings
from durable_agents.whatif import ModelJudge, Variant
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest
from tests.conftest import (
    PRUNE_NOW,
    approve_when_asked,
    drop_schema,
    postgres_or_skip,
    pruning_worker,
    run_id,
    settings_for,
)
from tests.whatif.test_whatif_invoice import journal


async def test_a_conversation_is_played_again_turn_by_turn(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    client = AgentClient(dev_env.client, settings)
    chat = await client.open_conversation("support-chat", run_id("chat"), label="chat")
    await chat.send("Hi there", by="jane")
    waiting = await chat.send("Please refund A-1001 20.00", by="jane")
    assert waiting.status == "waiting"
    await chat.approve(by="support-lead")
    await chat.reply(waiting.message_id)
    await chat.close(by="jane")
    await chat.result()
    before = journal(settings)
    assert [e["operation"] for e in before] == ["refund"]

    judge = ModelJudge("the customer is refunded as asked", settings=settings)
    same = await client.what_if([chat.run_id], graders=[judge])
    [run] = same.runs
    assert run.differences == [] and run.now.tokens == 0 and run.then.tokens > 0
    assert same.passed and run.grades[0].grader == "judge"
    assert len(run.now.replies) == 2 and run.now.replies == run.then.replies
    assert [(e.tool, e.source) for e in run.now.effects] == [("refund_order", "recorded")]
    assert run.now.approvals[0].by == "what-if (as support-lead)"

    # Without its refund tool the agent refunds nothing: the effect is removed.
    cut = await client.what_if(
        [chat.run_id], variant=Variant(tools=[look_up_order]), graders=[judge]
    )
    [run] = cut.runs
    assert [(c.change, c.tool) for c in run.effect_changes] == [("removed", "refund_order")]
    assert not cut.passed and "acted differently" in run.grades[0].reason
    assert journal(settings) == before

    # Reports go with the prune, at its age, as runs' rows do (dry first: only counted).
    recent = await pruning.prune(dev_env.client, settings, "30d", dry_run=False)
    assert recent.whatif_reports_deleted == 0
    async with pruning_worker(dev_env.client, settings) as short:
        dry = await pruning.prune(dev_env.client, short, PRUNE_NOW, dry_run=True)
        assert dry.whatif_reports_deleted == 2 and len(whatif.kept_reports(settings)) == 2
        gone = await pruning.prune(dev_env.client, short, PRUNE_NOW, dry_run=False)
    assert gone.whatif_reports_deleted == 2 and whatif.kept_reports(settings) == []


async def test_a_run_of_the_legacy_agent_is_played_again_too(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    """A run started before agents existed names no agent: it is played with the agent it
    ran with (before-agents), not refused."""
    rid = run_id("legacy")
    request = RunRequest(goal="Pay INV-1001", label="pay-invoice")
    assert request.agent is None
    await runs.start_run(dev_env.client, settings, request, rid)
    await approve_when_asked(dev_env.client, rid)
    assert (await runs.wait_result(dev_env.client, rid)).status == "completed"
    report = await AgentClient(dev_env.client, settings).what_if([rid])
    [run] = report.runs
    assert run.agent in (None, "before-agents") and report.totals.runs == 1
    assert run.differences == [] and run.now.tokens == 0


async def test_a_delegation_plays_its_child_again_as_a_shadow(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any, monkeypatch: Any
) -> None:
    kb = settings.data_dir / "kb"
    monkeypatch.setenv("KB_DIR", str(kb))
    rid = run_id("triage")
    request = RunRequest(goal="Ticket 12: my parcel is late", agent="triage", label="triage")
    await runs.start_run(dev_env.client, settings, request, rid)
    assert (await runs.wait_result(dev_env.client, rid)).status == "completed"
    notes = (kb / "notes.json").read_text()

    report = await AgentClient(dev_env.client, settings).what_if([rid])
    [run] = report.runs
    assert run.differences == [] and run.now.tokens == 0
    # The child's note, as its shadow child would have added it: from the record.
    [note] = run.now.effects
    assert (note.tool, note.source) == ("add_note", "recorded")
    assert note.run_id.startswith(f"{run.shadow_id}.")  # the shadow's own child
    assert (kb / "notes.json").read_text() == notes


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_an_encrypted_stack_played_again_from_a_history_file(
    dev_env: WorkflowEnvironment,
    model_server: EmbeddedModelServer,
    tmp_path: Path,
    store: str,
) -> None:
    plain = settings_for(dev_env.client, tmp_path / "data", model_server.port)
    settings = plain.model_copy(update={"encryption_keys": SecretStr(f"k1={new_key()}")})
    schema = None
    if store == "postgres":
        schema = f"w_{run_id('s').replace('-', '_')}"
        update = {"database_url": postgres_or_skip(), "database_schema": schema}
        settings = settings.model_copy(update=update)
    try:
        client = await connect(settings)
        rid = run_id("secret")
        request = RunRequest(goal="Pay invoice INV-1001", agent="invoice", label="pay-invoice")
        async with build_worker(await connect(settings, for_worker=True), settings):
            await runs.start_run(client, settings, request, rid)
            await approve_when_asked(client, rid)
            await runs.wait_result(client, rid)
        exported = tmp_path / "exported-under-another-name.json"
        timeline.export_history(await timeline.fetch_history(client, rid), exported)
        assert "ACME" not in exported.read_text()  # ciphertext: the file needs the keys
        before = journal(settings)

        report = await AgentClient(client, settings).what_if(history_files=[exported])
        [run] = report.runs
        assert run.run_id == rid and run.differences == [] and run.now.tokens == 0
        assert [e.tool for e in run.now.effects] == ["draft_email", "pay_invoice", "send_email"]
        assert journal(settings) == before
        kept = json.dumps(report.model_dump(mode="json"))
        assert "ACME" in kept  # the report itself is readable here, and sealed in the store
    finally:
        if schema is not None:
            drop_schema(settings.database_url or "", schema)
