"""Changing workflow code safely: the same change, with and without `workflow.patched`,
replayed against a history recorded before it (docs/changing-workflows.md)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from durable_agents.control import runs
from durable_agents.control.timeline import replay_files
from durable_agents.worker.main import build_worker
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RunRequest, RunResult
from durable_agents.workflows.people_inputs import Decision
from durable_agents.workflows.phases.story import Story
from tests.conftest import run_id, wait_for_approval

HAPPY_PATH = Path(__file__).parent.parent / "histories" / "happy-path.json"
PATCH = "rate-limit-final-answer"


class RateLimitedStory(Story):
    """v2 waits a second before the final answer (a rate limit), with no patch."""

    async def _final_answer(self) -> str:
        await workflow.sleep(timedelta(seconds=1))
        return await super()._final_answer()


class PatchedRateLimitedStory(Story):
    """The same change behind `workflow.patched`: old runs keep the old path."""

    async def _final_answer(self) -> str:
        if workflow.patched(PATCH):
            await workflow.sleep(timedelta(seconds=1))
        return await super()._final_answer()


@workflow.defn(name="AgentWorkflow", sandboxed=False)
class UnpatchedChange(AgentWorkflow):
    story_type = RateLimitedStory

    @workflow.run
    async def run(self, request: RunRequest) -> RunResult:
        return await super().run(request)


@workflow.defn(name="AgentWorkflow", sandboxed=False)
class PatchedChange(AgentWorkflow):
    story_type = PatchedRateLimitedStory

    @workflow.run
    async def run(self, request: RunRequest) -> RunResult:
        return await super().run(request)


async def replay(workflow_class: type) -> Exception | None:
    history = WorkflowHistory.from_json("happy-path", json.loads(HAPPY_PATH.read_text()))
    replayer = Replayer(workflows=[workflow_class], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return result.replay_failure


async def test_the_recorded_history_replays_under_the_patched_code():
    assert await replay(PatchedChange) is None


async def test_the_same_change_without_a_patch_is_caught_with_a_clear_message():
    failure = await replay(UnpatchedChange)
    assert failure is not None
    assert "Nondeterminism" in str(failure) or "nondeterminism" in str(failure)


async def test_new_runs_take_the_patched_path(time_env, ts_settings):
    settings = ts_settings.model_copy(update={"task_queue": "patched"})
    client, rid = time_env.client, run_id("patched")
    async with build_worker(client, settings, workflows=[PatchedChange]):
        await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)

        await wait_for_approval(client, rid)
        await runs.approve(client, rid, Decision(by="alice"))
        await runs.wait_result(client, rid)
    history = await client.get_workflow_handle(rid).fetch_history()
    markers = [
        e.marker_recorded_event_attributes.SerializeToString()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    ]
    assert any(PATCH.encode() in marker for marker in markers)  # this change's own marker
    # The one-second timer only the patched code starts (the approval's deadline is a day).
    timers = [
        e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
    ]
    assert timedelta(seconds=1) in timers


async def test_replay_reports_the_event_where_a_history_diverges(tmp_path):
    """A history whose recorded commands differ from what the code does now: the replay
    command names the event."""
    events = json.loads(HAPPY_PATH.read_text())
    scheduled = next(
        e
        for e in events["events"]
        if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"
        and e["activityTaskScheduledEventAttributes"]["activityType"]["name"] == "run_tool"
    )
    scheduled["activityTaskScheduledEventAttributes"]["activityType"]["name"] = "run_tool_v0"
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(events))
    [outcome] = await replay_files([tampered])
    assert not outcome.ok and "Nondeterminism" in outcome.message
    assert outcome.event_id == int(scheduled["eventId"])
