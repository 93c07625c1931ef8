"""A worker asked to stop (SIGTERM from an orchestrator, SIGINT from a terminal) stops
polling and lets the activity in flight finish: nothing is left to time out and be run
again by the next worker."""

from __future__ import annotations

import signal

import pytest
from temporalio.api.enums.v1 import EventType, PendingActivityState

from durable_agents.control import runs
from durable_agents.control.timeline import fetch_chain
from durable_agents.infra.stack import worker_polling
from durable_agents.workflows.contracts import RunRequest
from tests.conftest import eventually, run_id, spawn_worker

# The model call of step 2 takes 4 s: the signal lands while it is in flight.
SCENARIO = "long?steps=3&reply_bytes=64&fault=step2:delay=4"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_stopped_worker_finishes_its_activity_in_flight(
    dev_env, settings, model_server, tmp_path, signum
):
    client, rid = dev_env.client, run_id("stop")
    log = tmp_path / "worker.log"
    worker = spawn_worker(settings, log)
    try:
        await eventually(lambda: worker_polling(settings), within=30)
        request = RunRequest.model_validate({"goal": "stop", "scenario": SCENARIO})
        await runs.start_run(client, settings, request, rid)

        async def slow_call_running() -> bool:
            if (await runs.get_summary(client, rid)).steps_done != 1:
                return False
            described = await client.get_workflow_handle(rid).describe()
            return any(
                a.activity_type.name == "call_model"
                and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
                for a in described.raw_description.pending_activities
            )

        await eventually(slow_call_running, within=30, interval=0.05)
        worker.send_signal(signum)
        assert worker.wait(timeout=30) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
    assert "letting activities in flight finish" in log.read_text()

    # The call in flight completed on its first attempt; nothing timed out.
    events = [e for _, history in await fetch_chain(client, rid) for e in history.events]
    types = [e.event_type for e in events]
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT not in types
    started = [
        e.activity_task_started_event_attributes
        for e in events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert all(s.attempt == 1 for s in started)
    completed = types.count(EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
    assert completed == len(started)
    # Nothing was dropped: no activity waits to be retried, every one scheduled completed.
    described = await client.get_workflow_handle(rid).describe()
    assert list(described.raw_description.pending_activities) == []
    assert completed == types.count(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)

    # Another worker takes the run on from there, with nothing to redo.
    second = spawn_worker(settings, tmp_path / "worker2.log")
    try:
        assert (await runs.wait_result(client, rid)).status == "completed"
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
