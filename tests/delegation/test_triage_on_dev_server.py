"""The bundled triage example on the dev server, through the offline model over HTTP: the
research sub-agent runs as a child and reaches its knowledge base over MCP (stdio)."""

from __future__ import annotations

import json

from starters import runs, timeline
from tests.conftest import run_id
from workflows.contracts import RunRequest


async def test_triage_delegates_to_research_which_uses_mcp(dev_env, worker, settings, monkeypatch):
    monkeypatch.setenv("KB_DIR", str(settings.data_dir / "kb"))
    rid = run_id("triage")
    request = RunRequest(goal="Ticket 12: my parcel is late", agent="triage", label="triage")
    await runs.start_run(dev_env.client, settings, request, rid)
    result = await runs.wait_result(dev_env.client, rid)
    state = await runs.get_state(dev_env.client, rid)
    assert result.status == "completed", result
    [delegation] = state.delegations
    child = await runs.get_state(dev_env.client, delegation.child_id)
    assert child.status.value == "completed"
    assert [r.tool for r in child.results] == ["search_notes", "add_note"]
    notes = json.loads((settings.data_dir / "kb" / "notes.json").read_text())
    assert "late parcel refund" in notes["notes"]
    assert list(notes["keys"]) == [f"{child.store_key}/step-1/call_loop_t1_0"]


async def test_a_reset_of_the_parent_finds_its_child_and_starts_no_second(
    dev_env, worker, settings, monkeypatch
):
    monkeypatch.setenv("KB_DIR", str(settings.data_dir / "kb"))
    client, rid = dev_env.client, run_id("reset")
    request = RunRequest(goal="Ticket 13: late parcel", agent="triage", label="triage")
    await runs.start_run(client, settings, request, rid)
    await runs.wait_result(client, rid)
    [first] = (await runs.get_state(client, rid)).delegations
    found = await timeline.rebuild(client, rid)
    before = next(m for m in found.moments if m.kind == "model")

    await timeline.rewind(client, rid, before.index, by="ops")
    result = await runs.wait_result(client, rid)
    state = await runs.get_state(client, rid)

    assert result.status == "completed"
    [again] = state.delegations
    assert again.child_id == first.child_id and again.status == "completed"
    children = [w async for w in client.list_workflows(f'WorkflowId = "{first.child_id}"')]
    assert len(children) == 1  # found, not started twice
    notes = json.loads((settings.data_dir / "kb" / "notes.json").read_text())
    assert len(notes["keys"]) == 1
