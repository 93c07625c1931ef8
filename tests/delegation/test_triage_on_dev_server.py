"""The bundled triage example on the dev server, through the offline model over HTTP: the
research sub-agent runs as a child and reaches its knowledge base over MCP (stdio)."""

from __future__ import annotations

import json

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest

from durable_agents.control import runs, timeline
from durable_agents.infra.stack import settings_env
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunBudget, RunPolicy, RunRequest
from durable_agents.workflows.people_inputs import BudgetRaise, Decision
from durable_agents.workflows.records import BUDGET_REQUEST
from tests.conftest import eventually, run_id
from tests.starters.test_verb_walk import agentctl


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


async def test_a_dollar_budget_stops_the_tree_at_n_then_a_raise_resumes_it(
    dev_env, settings, monkeypatch
):
    """The acceptance: a budget of N dollars across the parent and its research child,
    summed from the usage the offline model reported, stops spending at N and waits."""
    monkeypatch.setenv("KB_DIR", str(settings.data_dir / "kb"))
    # Priced so the whole tree costs under the triage agent's declared $0.50 (a floor no
    # start may raise: workflows/floors.py).
    settings.price_input_per_mtok, settings.price_output_per_mtok = 2.0, 8.0
    client = dev_env.client
    async with build_worker(client, settings):
        # what each call costs, measured on a run with room to spare
        free = run_id("free")
        await runs.start_run(client, settings, triage_request(RunBudget(usd=0.5)), free)
        await runs.wait_result(client, free)
        parent, child = await tree_of(client, free)
        n = round((parent.usage.cost_usd + child.usage.cost_usd) / 2, 6)  # half the tree

        rid = run_id("budget")
        await runs.start_run(client, settings, triage_request(RunBudget(usd=n)), rid)
        waiting = await eventually(lambda: _waiting_in_tree(client, rid), within=30)
        parent, child = await tree_of(client, rid)
        spent = parent.usage.cost_usd + child.usage.cost_usd
        # spent up to N, never past it: the next call's input and a reply would not fit
        assert n / 2 < spent <= n, (spent, n, waiting.pending_approvals[0].rule)
        assert "budget" in waiting.pending_approvals[0].rule
        assert parent.spent.usd == pytest.approx(spent)  # the child's spend rolled up live

        await runs.raise_budget(client, rid, BudgetRaise(by="cfo", usd=n * 10))
        result = await runs.wait_result(client, rid)
        parent, child = await tree_of(client, rid)
    assert result.status == "completed"
    assert result.spent is not None
    assert result.spent.usd == pytest.approx(parent.usage.cost_usd + child.usage.cost_usd)


def triage_request(budget: RunBudget | None = None) -> RunRequest:
    return RunRequest(goal="Ticket: late parcel", agent="triage", label="triage", budget=budget)


async def tree_of(client, rid: str):
    parent = await runs.get_state(client, rid)
    return parent, await runs.get_state(client, parent.delegations[0].child_id)


async def _waiting_in_tree(client, rid: str):
    parent = await runs.get_state(client, rid)
    for run in [parent.run_id, *(d.child_id for d in parent.delegations)]:
        summary = await runs.get_summary(client, run)
        if any(a.tool == BUDGET_REQUEST for a in summary.pending_approvals):
            return summary
    return None


async def test_the_cli_links_a_child_to_its_parent_and_back(dev_env, worker, settings, monkeypatch):
    monkeypatch.setenv("KB_DIR", str(settings.data_dir / "kb"))
    client, rid, env = dev_env.client, run_id("linked"), settings_env(settings)
    policy = RunPolicy(approve_all_side_effects=True)  # the child's add_note waits
    request = RunRequest(goal="Ticket 31", agent="triage", label="triage", policy=policy)
    await runs.start_run(client, settings, request, rid)

    async def child_in_inbox():
        items = await runs.inbox(client)
        return next((i for i in items if i.parent == rid), None)

    item = await eventually(child_in_inbox, within=30)
    listed = json.loads((await agentctl(env, "inbox", "--json")).stdout)
    assert {"run_id": item.run_id, "parent": rid}.items() <= next(
        i for i in listed if i["run_id"] == item.run_id
    ).items()
    parent_view = (await agentctl(env, "show", rid)).stdout
    assert "sub-agents" in parent_view and item.run_id[:20] in parent_view
    assert f"sub-agent of {rid}" in (await agentctl(env, "show", item.run_id)).stdout
    moments = json.loads((await agentctl(env, "history", rid, "--json")).stdout)
    [delegated] = [m for m in moments if m["kind"] == "delegated"]
    assert delegated["detail"] == f"research: {item.run_id}"  # the child, one step, linked

    assert (await agentctl(env, "approve", item.run_id, "--as", "alice")).exit_code == 0
    assert (await runs.wait_result(client, rid)).status == "completed"
    moments = json.loads((await agentctl(env, "history", rid, "--json")).stdout)
    assert [m["detail"] for m in moments if m["kind"] == "delegate answered"] == [
        "research: completed"
    ]


async def test_a_child_whose_parent_is_gone_gets_nothing_more_done(dev_env, settings, monkeypatch):
    """The parent of a waiting sub-agent is deleted (as Temporal's retention would remove
    it): a worker that never saw the tree refuses the child's next activity, never taking
    the parent as "checked back then"; nothing the approval let through is done."""
    monkeypatch.setenv("KB_DIR", str(settings.data_dir / "kb"))
    client, rid = dev_env.client, run_id("orphaned")
    policy = RunPolicy(approve_all_side_effects=True)  # the child's add_note waits
    request = RunRequest(goal="Ticket 32", agent="triage", label="triage", policy=policy)
    async with build_worker(client, settings):
        await runs.start_run(client, settings, request, rid)

        async def child_in_inbox():
            items = await runs.inbox(client)
            return next((i for i in items if i.parent == rid), None)

        child = (await eventually(child_in_inbox, within=30)).run_id
    await client.workflow_service.delete_workflow_execution(
        DeleteWorkflowExecutionRequest(
            namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=rid)
        )
    )
    async with build_worker(client, settings):
        await runs.approve(client, child, Decision(by="alice"))
        outcome = await runs.wait_for_outcome(client, child)
    assert outcome["status"] == "failed", outcome
    assert f"was started by {rid}, which Temporal no longer shows" in outcome["error"]
    notes = settings.data_dir / "kb" / "notes.json"
    assert not notes.exists() or "late parcel" not in notes.read_text()
