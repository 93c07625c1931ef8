"""Every recorded history in tests/histories replays against the current workflow code.
A change to the workflow that is not safe for runs in flight fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from durable_agents.control.agents import local_agents
from durable_agents.control.timeline import (
    agent_history,
    replay_files,
    replayer,
    replaying_with,
    under_its_own_id,
)
from durable_agents.workflows import timeline
from tests.histories.rule_agent import FIXTURE_AGENT_MODULES

HISTORIES = Path(__file__).parent.parent / "histories"
MANIFEST = json.loads((HISTORIES / "manifest.json").read_text())


def test_every_behaviour_has_a_fixture():
    behaviours = {"happy-path", "rejected-approval", "question-answered", "edited"}
    behaviours |= {"paused-and-resumed", "retried-model-errors", "cancelled", "failed", "forked"}
    behaviours |= {"continued-as-new", "identity-happy-path", "malformed-signals"}
    behaviours |= {"plain-loop", "signed-changes", "forked-with-parent"}
    behaviours |= {"cut-short", "cut-short-before-patch", "tool-failed"}
    behaviours |= {"tool-failed-before-patch", "cancelled-with-the-start"}
    behaviours |= {"cancel-lost-before-patch", "signed-decisions-v1", "policy-tightened"}
    behaviours |= {"forked-record-checked", "people-checked"}
    behaviours |= {"conversation", "conversation-continued", "sub-agent", "mcp-call"}
    behaviours |= {"evaluator-rule", "budget-raised", "budget-stopped", "budget-deadline"}
    behaviours |= {"opened-in-one", "conversation-admitted", "conversation-admitted-continued"}
    behaviours |= {"sub-agent-admitted", "sub-agent-admitted-child", "signed-moments"}
    assert set(MANIFEST) == behaviours
    assert {p.stem for p in HISTORIES.glob("*.json")} - {"manifest"} == behaviours


@pytest.fixture(scope="module")
def fixture_agents():
    """The agents the fixtures were recorded with: the bundled ones and the auditor."""
    return local_agents(FIXTURE_AGENT_MODULES)


@pytest.mark.parametrize("name", sorted(MANIFEST))
async def test_recorded_history_replays(name, fixture_agents):
    path = HISTORIES / f"{name}.json"
    history = await under_its_own_id(agent_history(path))
    with replaying_with(fixture_agents):
        [outcome] = await replay_files([path])
        assert outcome.ok, outcome.message
        with timeline.recording(history.workflow_id) as moments:
            await replayer().replay_workflow(history)
    last = moments[max(moments)]
    assert last.state.status.value == MANIFEST[name]


async def test_runs_recorded_before_the_identity_keep_their_workflow_id_as_store_key():
    """Runs in flight across the upgrade keep their stored data where it was."""

    async def last_state(name):
        path = HISTORIES / f"{name}.json"
        history = WorkflowHistory.from_json(name, json.loads(path.read_text()))
        with timeline.recording(name) as moments:
            await replayer().replay_workflow(history)
        return moments[max(moments)].state

    assert (await last_state("happy-path")).store_key == "happy-path"
    recorded_after = await last_state("identity-happy-path")
    assert recorded_after.store_key.startswith("identity-happy-path@")
    assert recorded_after.identity == recorded_after.store_key


async def test_a_replay_reads_the_agent_the_run_recorded_not_todays_code():
    """The refund agent gained a tool since the plain-loop fixture was recorded: replayed,
    the run still has exactly the tools it started with (read back from its history)."""
    from durable_agents.examples.refund import issue_refund, refund_agent
    from durable_agents.workflows.agents import Agent
    from durable_agents.workflows.registry import AgentRegistry, serve_for_replay
    from durable_agents.workflows.tools import tool
    from tests.conftest import EXAMPLE_AGENTS

    @tool
    def apologise(customer: str) -> str:
        """Say sorry to a customer."""
        return f"sorry, {customer}"

    grown = Agent(
        name="refund",
        instructions=refund_agent.instructions,
        tools=[issue_refund, apologise],
        planning=False,
        policy=refund_agent.policy,
    )
    path = HISTORIES / "plain-loop.json"
    history = WorkflowHistory.from_json("plain-loop", json.loads(path.read_text()))
    try:
        with timeline.recording("plain-loop") as moments:
            await replayer(agents=AgentRegistry().add(grown)).replay_workflow(history)
    finally:
        serve_for_replay(EXAMPLE_AGENTS)
    state = moments[max(moments)].state
    assert state.agent is not None and [t.name for t in state.agent.tools] == ["issue_refund"]
    assert state.status.value == "completed" and state.plan[0].title == "Reach the goal"


async def test_replaying_without_the_runs_agent_says_so_in_one_line(monkeypatch):
    monkeypatch.setenv("AGENT_MODULES", "durable_agents.examples.invoice")
    [outcome] = await replay_files([HISTORIES / "plain-loop.json"])
    assert not outcome.ok
    assert outcome.message.startswith("no agent named 'refund' here (agents: invoice)")
    assert "\n" not in outcome.message


# What each guard of the phases' rebuild must hold: a moment kind, and an activity.
GUARDS = {
    "conversation": ({"message", "approval requested", "replied", "continued as new"}, "run_tool"),
    "conversation-continued": ({"message", "conversation closed", "completed"}, "call_model"),
    "sub-agent": ({"delegated", "delegate answered", "completed"}, "call_model"),
    "mcp-call": ({"tool", "completed"}, "call_mcp_tool"),
    "evaluator-rule": ({"approval requested", "denied by rule", "completed"}, "evaluate_call"),
}


@pytest.mark.parametrize("name", sorted(GUARDS))
async def test_the_phase_guards_record_what_they_guard(name, fixture_agents):
    """A re-recording that lost the approval mid-turn, the child, the MCP call or the
    evaluator would leave its part of the workflow unguarded: it fails here."""
    kinds, activity = GUARDS[name]
    history = await under_its_own_id(agent_history(HISTORIES / f"{name}.json"))
    with replaying_with(fixture_agents), timeline.recording(history.workflow_id) as moments:
        await replayer().replay_workflow(history)
    assert kinds <= {m.kind for m in moments.values()}
    scheduled = {
        e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
    }
    assert activity in scheduled


async def test_a_budget_asked_as_an_approval_named_budget_reads_and_shows_as_a_budget():
    """Recorded by the code before budget requests had a kind: replayed, the run asks with
    a budget request; a state from an older worker (no kind) reads as one too, and the
    console's panel shows it as the budget, not as a tool to approve."""
    from durable_agents.console.web import templates
    from durable_agents.workflows.state import RunState

    history = await under_its_own_id(agent_history(HISTORIES / "budget-raised.json"))
    with timeline.recording(history.workflow_id) as moments:
        await replayer().replay_workflow(history)
    at = next(m for m in moments.values() if m.kind == "budget reached")
    [asked] = at.state.pending_approvals
    assert asked.is_budget and asked.tool == "(budget)"
    older = at.state.model_dump(mode="json")
    for request in older["approvals"]:
        del request["kind"]
    read = RunState.model_validate(older)
    assert [(a.is_budget, a.kind.value) for a in read.pending_approvals] == [(True, "budget")]
    panel = templates.env.get_template("panel.html").render(
        state=read, me="cfo", csrf="t", now=at.state.updated_at, roles={"operator": False}
    )
    assert "The budget is spent" in panel and "Raise and go on" in panel
    assert "Approve" not in panel
