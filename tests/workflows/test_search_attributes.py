"""Search attributes cost a billable action per upsert: a run upserts when its status or
what it waits for changes (with the step of that moment), never for a step alone."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from bench.actions import billable_actions
from durable_agents.control import runs
from durable_agents.worker.main import build_worker
from durable_agents.workflows import search_attributes as sa
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from tests.conftest import run_id, wait_for_approval

STEPS = 6


def upserts(events: list[HistoryEvent]) -> list[dict[str, bytes]]:
    """What each upsert of ours set (Temporal's versioning upserts left out)."""
    found = []
    for event in events:
        if event.event_type != EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            continue
        fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
        ours = {k: v.data for k, v in fields.indexed_fields.items() if k.startswith("Agent")}
        if ours:
            found.append(ours)
    return found


async def test_a_long_run_upserts_on_changes_of_status_only(time_env, ts_settings):
    client, rid = time_env.client, run_id("lean-sa")
    request = RunRequest.model_validate(
        {
            "goal": "work through the items",
            "scenario": f"long?steps={STEPS}&reply_bytes=256",
            "limits": {"context": "step"},
        }
    )
    async with build_worker(client, ts_settings):
        await runs.start_run(client, ts_settings, request, rid)
        result = await runs.wait_result(client, rid)
    assert result.status == "completed"
    history = await client.get_workflow_handle(rid).fetch_history()
    # Started as planning (the start sets it): running at step 1, then completed.
    assert upserts(list(history.events)) == [
        {"AgentStatus": b'"running"', "AgentStep": b"1"},
        {"AgentStatus": b'"completed"', "AgentStep": b"0"},
    ]
    actions = billable_actions(history.events)
    assert actions["search-attribute upsert"] == 2
    assert actions["activity"] == 2 * STEPS + 2  # the plan, a model and a tool a step, the answer


async def test_a_waiting_run_shows_its_status_step_and_wait_in_its_attributes(
    time_env, ts_settings
):
    client, rid = time_env.client, run_id("lean-sa-wait")
    async with build_worker(client, ts_settings):
        await runs.start_run(client, ts_settings, RunRequest(goal="pay", label="pay-invoice"), rid)
        summary = await wait_for_approval(client, rid)
        described = await client.get_workflow_handle(rid).describe()
        attributes = described.typed_search_attributes
        assert attributes.get(sa.STATUS) == "awaiting_approval"
        assert attributes.get(sa.WAITING_FOR) == "approval"
        assert summary.current_step is not None
        assert attributes.get(sa.STEP) == summary.current_step
        # The Web UI's current details say the same, with the step's title.
        metadata = await client.get_workflow_handle(rid).query("__temporal_workflow_metadata")
        assert f"step {summary.current_step}/" in metadata.current_details
        assert "awaiting approval (pay_invoice)" in metadata.current_details
        await runs.approve(client, rid, Decision(by="alice"))
        assert (await runs.wait_result(client, rid)).status == "completed"
