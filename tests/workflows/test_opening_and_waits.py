"""What a run shows in Temporal's Web UI: the wait for a person is a timer named for what
it waits on (not an unnamed timer)."""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import EventType

from durable_agents.control import runs
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor
from tests.conftest import run_id, wait_for_approval


async def history_events(client, rid: str):
    return [event async for event in runs.handle(client, rid).fetch_history_events()]


@pytest.mark.usefixtures("worker")
async def test_the_wait_for_a_person_is_a_named_timer(dev_env, settings):
    client, rid = dev_env.client, run_id("named-wait")
    request = RunRequest(goal="pay the invoice", scenario="pay-invoice")
    await runs.start_run(client, settings, request, rid)
    summary = await wait_for_approval(client, rid, within=60)
    [pending] = summary.pending_approvals
    timers = [
        e
        for e in await history_events(client, rid)
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
    ]
    [summary_payload] = [e.user_metadata.summary for e in timers if e.user_metadata.summary.data]
    said = client.data_converter.payload_converter.from_payload(summary_payload, str)
    assert said == f"waiting for a person: {pending.request_id} (approve {pending.tool})"
    await runs.cancel(client, rid, Actor(by="test"))


@pytest.mark.usefixtures("worker")
async def test_a_new_run_opens_on_one_patch_marker(dev_env, settings):
    """A plain tool-loop run wrote four patch markers at its opening, each with the SDK's
    TemporalChangeVersion upsert: with its status, five search-attribute writes before
    its first model call, and seven in all. The opening's patches now share one marker."""
    client, rid = dev_env.client, run_id("opening")
    await runs.start_run(client, settings, RunRequest(goal="hello", agent="before-agents"), rid)
    await runs.wait_result(client, rid)
    events = await history_events(client, rid)
    markers = [
        e.marker_recorded_event_attributes.marker_name
        for e in events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    ]
    upserts = [
        sorted(
            e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        )
        for e in events
        if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    ]
    started = events[0].workflow_execution_started_event_attributes
    assert list(started.search_attributes.indexed_fields) == ["AgentStatus"]  # set by the start
    assert markers.count("core_patch") == 1  # was 4
    # The one marker's write, then the status when it runs and when it completes (was 6).
    status = ["AgentStatus", "AgentStep"]
    assert upserts == [["TemporalChangeVersion"], status, status]
