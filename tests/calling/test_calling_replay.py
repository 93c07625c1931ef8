"""A team's workflow that called an agent, and the agent's run it started, replay on the
code here, through the plugin's replayer configuration (as a team's replay tests would)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from durable_agents import DurableAgentsPlugin, Settings
from durable_agents.workflows import timeline
from tests.calling.billing import Billing, triage

HERE = Path(__file__).parent.parent / "histories" / "calling"


def history(name: str) -> WorkflowHistory:
    return WorkflowHistory.from_json(name, json.loads((HERE / f"{name}.json").read_text()))


@pytest.mark.parametrize("name", ["billing-42", "billing-42.triage"])
async def test_the_caller_and_its_agent_run_replay(name, tmp_path):
    plugin = DurableAgentsPlugin([triage], settings=Settings(data_dir=tmp_path, metrics_port=0))
    replayer = Replayer(workflows=[Billing], plugins=[plugin])
    with timeline.recording(name) as moments:
        result = await replayer.replay_workflow(history(name), raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
    if name == "billing-42.triage":  # the agent's run: its typed answer, after approval
        state = moments[max(moments)].state
        assert state.output == {"refund": True, "priority": "high"}
        assert [a.decided_by for a in state.approvals] == ["finance"]


async def test_a_changed_call_is_caught_by_the_replay(tmp_path):
    """The guard works: the caller asking another agent no longer replays."""
    plugin = DurableAgentsPlugin([triage], settings=Settings(data_dir=tmp_path, metrics_port=0))
    recorded = json.loads((HERE / "billing-42.json").read_text())
    for event in recorded["events"]:
        attrs = event.get("startChildWorkflowExecutionInitiatedEventAttributes")
        if attrs:
            attrs["workflowType"]["name"] = "SomeOtherWorkflow"
    changed = WorkflowHistory.from_json("billing-42", recorded)
    result = await Replayer(workflows=[Billing], plugins=[plugin]).replay_workflow(
        changed, raise_on_replay_failure=False
    )
    assert result.replay_failure is not None
