"""The console with sub-agents and budgets: a child's approval in the inbox with a link to
its parent, the parent's page linking down, and a spent budget raised from the page."""

from __future__ import annotations

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agents.control import runs
from durable_agents.workflows.contracts import RunBudget, RunPolicy, RunRequest
from durable_agents.workflows.records import BUDGET_REQUEST, RunStatus
from tests.conftest import eventually, run_id
from tests.console.live import LiveConsole, signed_in


@pytest.fixture(autouse=True)
def knowledge_base(settings, monkeypatch):
    monkeypatch.setenv("KB_DIR", str(settings.data_dir / "kb"))


async def waiting_child(client, settings) -> tuple[str, str]:
    rid = run_id("triage")
    policy = RunPolicy(approve_all_side_effects=True)  # the child's add_note waits
    request = RunRequest(goal="Ticket 21", agent="triage", label="triage", policy=policy)
    await runs.start_run(client, settings, request, rid)

    async def child_waits() -> str | None:
        state = await runs.get_state(client, rid)
        if not state.delegations:
            return None
        child = await runs.get_summary(client, state.delegations[0].child_id)
        return child.run_id if child.pending_approvals else None

    return rid, await eventually(child_waits, within=30)


async def test_a_childs_approval_links_to_its_parent_and_the_parent_links_down(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    rid, child = await waiting_child(dev_env.client, console.settings)
    alice, token = await signed_in(console, "alice")

    inbox = await eventually(lambda: _inbox_with(alice, child), within=30)
    assert f'href="/runs/{rid}" class="parent-link"' in inbox
    parent_page = (await alice.get(f"/runs/{rid}")).text
    assert "Sub-agents" in parent_page and f'href="/runs/{child}"' in parent_page
    assert "waiting for sub-agent research" in parent_page
    child_page = (await alice.get(f"/runs/{child}")).text
    assert f'sub-agent of <a href="/runs/{rid}" class="parent-link"' in child_page

    request = (await runs.get_summary(dev_env.client, child)).pending_approvals[0]
    form = {"csrf": token, "request_id": request.request_id, "decision": "approve"}
    assert (await alice.post(f"/runs/{child}/decide", data=form)).status_code == 303
    assert (await runs.wait_result(dev_env.client, rid)).status == "completed"


async def _inbox_with(http, child: str) -> str | None:
    page = (await http.get("/")).text
    return page if f'data-run="{child}"' in page else None


async def test_a_spent_budget_is_raised_from_the_run_page(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    client, rid = dev_env.client, run_id("research")
    request = RunRequest(
        goal="Refund policy?", agent="research", label="triage", budget=RunBudget(tool_calls=1)
    )
    await runs.start_run(client, console.settings, request, rid)

    async def at_budget():
        summary = await runs.get_summary(client, rid)
        return next((a for a in summary.pending_approvals if a.tool == BUDGET_REQUEST), None)

    asked = await eventually(at_budget, within=30)
    alice, token = await signed_in(console, "alice")
    page = (await alice.get(f"/runs/{rid}")).text
    assert "The budget is spent" in page and "Raise and go on" in page

    approve = {"csrf": token, "request_id": asked.request_id, "decision": "approve"}
    refused = await alice.post(f"/runs/{rid}/decide", data=approve)
    assert refused.status_code == 409 and "not approved but raised" in refused.text
    bad = await alice.post(f"/runs/{rid}/budget", data={"csrf": token, "tool_calls": "many"})
    assert bad.status_code == 422
    below = await alice.post(f"/runs/{rid}/budget", data={"csrf": token, "tool_calls": "0"})
    assert below.status_code == 409 and "below what is spent" in below.text
    assert (await runs.get_summary(client, rid)).status is RunStatus.AWAITING_APPROVAL

    raised = await alice.post(
        f"/runs/{rid}/budget", data={"csrf": token, "tool_calls": "5", "usd": ""}
    )
    assert raised.status_code == 303, raised.text
    assert (await runs.wait_result(client, rid)).status == "completed"
    state = await runs.get_state(client, rid)
    assert state.budget == RunBudget(tool_calls=5)
    assert any(e.action == "budget_raised" and e.actor == "alice" for e in state.audit)
