"""Runs on the real dev server with the real worker and the offline model over HTTP."""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from bench.harness import history_bytes
from durable_agents.control import runs
from durable_agents.control.timeline import fetch_chain
from durable_agents.examples.providers import Providers
from durable_agents.workflows import search_attributes as sa
from durable_agents.workflows.activity_io import run_tag
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RunLimits, RunRequest
from durable_agents.workflows.people_inputs import Decision
from durable_agents.workflows.records import RunStatus
from tests.conftest import approve_when_asked, count_effects, eventually, run_id

pytestmark = pytest.mark.usefixtures("worker")


def started_attempts(history, activity_type):
    scheduled = {
        e.event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity_type
    }
    return [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in scheduled
    ]


async def test_429_twice_then_success(dev_env, settings):
    client, rid = dev_env.client, run_id("rl")
    request = RunRequest(goal="pay", label="pay-invoice?fault=plan:429*2")
    await runs.start_run(client, settings, request, rid)
    await approve_when_asked(client, rid)
    result = await runs.wait_result(client, rid)
    assert result.status == "completed"
    history = await client.get_workflow_handle(rid).fetch_history()
    # The plan call took three attempts; every other model call one.
    assert max(started_attempts(history, "call_model")) == 3
    assert count_effects(settings, rid, "charge") == 1


async def test_401_fails_the_run_with_a_clear_error(dev_env, settings):
    client, rid = dev_env.client, run_id("auth")
    await runs.start_run(
        client, settings, RunRequest(goal="pay", label="pay-invoice?fault=plan:401"), rid
    )
    with pytest.raises(WorkflowFailureError) as failure:
        await runs.wait_result(client, rid)
    message = str(failure.value.cause)
    assert "model endpoint refused the request (HTTP 401)" in message
    state = await runs.get_state(client, rid)
    assert state.status is RunStatus.FAILED
    assert "HTTP 401" in state.errors[0]
    history = await client.get_workflow_handle(rid).fetch_history()
    assert started_attempts(history, "call_model") == [1]  # not retried
    description = await client.get_workflow_handle(rid).describe()
    assert description.typed_search_attributes.get(sa.STATUS) == "failed"


async def test_starting_a_running_id_attaches_instead_of_starting_a_second_run(dev_env, settings):
    client, rid = dev_env.client, run_id("attach")
    request = RunRequest(goal="pay", label="pay-invoice")
    first = await runs.start_run(client, settings, request, rid)
    second = await runs.start_run(client, settings, request, rid)
    assert (first.attached, second.attached) == (False, True)
    executions = [e async for e in client.list_workflows(f"WorkflowId = '{rid}'")]
    assert len(executions) == 1

    await approve_when_asked(client, rid)
    await runs.wait_result(client, rid)
    assert count_effects(settings, rid, "charge") == 1
    with pytest.raises(runs.RunError, match="already exists and is completed"):
        await runs.start_run(client, settings, request, rid)


async def test_bad_run_id_is_refused_before_anything_starts(dev_env, settings):
    with pytest.raises(runs.RunError, match="bad run id"):
        await runs.start_run(dev_env.client, settings, RunRequest(goal="x"), "has space")


async def test_web_ui_sees_status_step_details_and_activity_summaries(dev_env, settings):
    client, rid = dev_env.client, run_id("ui")
    await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)

    async def listed_waiting():
        found = await runs.list_runs(client, RunStatus.AWAITING_APPROVAL)
        return [r for r in found if r.run_id == rid]

    [listing] = await eventually(listed_waiting)
    assert (listing.step, listing.waiting_for) == (3, "approval")
    metadata = await client.get_workflow_handle(rid).query("__temporal_workflow_metadata")
    details = metadata.current_details
    assert details == "step 3/4: Pay the invoice — awaiting approval (pay_invoice)"

    await runs.approve(client, rid, Decision(by="alice"))
    await runs.wait_result(client, rid)
    history = await client.get_workflow_handle(rid).fetch_history()
    summaries = [
        json.loads(e.user_metadata.summary.data)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert summaries[0] == "model: plan"
    assert "tool: pay_invoice" in summaries and "model: final answer" in summaries
    assert [r.run_id for r in await runs.list_runs(client, RunStatus.COMPLETED)].count(rid) == 1


async def test_history_per_step_stays_small_and_flat(dev_env, settings):
    """Invariant 3: payloads carry references, so per-step history does not grow. A run
    pays a fixed cost once (its start, its recorded agent: about 1.3 KB); what each step
    adds stays under 2.85 KB and the same from step 5 to step 40."""
    size = {}
    for steps in (5, 40):
        rid = run_id(f"flat{steps}")
        request = RunRequest(goal="bench", label=f"long?steps={steps}&reply_bytes=1024")
        await runs.start_run(dev_env.client, settings, request, rid)
        await runs.wait_result(dev_env.client, rid)
        size[steps], _, _ = await history_bytes(dev_env.client, rid)
        assert count_effects(settings, rid, "note") == steps
    per_step_added = (size[40] - size[5]) / 35
    figures = {"per step added": per_step_added, "per step at 40": size[40] / 40}
    # 2,601 and 2,718 B (issue 46): a step's payloads leave their defaults, the model's
    # name and the run they name out (2,850 to 3,000 B before); 2,682 and 2,801 B (issue
    # 52): each step's two inputs name their run by its tag, so a sealed input copied into
    # another run's task is refused (some 80 B a step).
    assert max(figures.values()) <= 2850, figures
    assert abs(size[40] / 40 - per_step_added) / per_step_added <= 0.25, figures


async def test_a_recorded_run_replays_deterministically(dev_env, settings):
    client, rid = dev_env.client, run_id("replay")
    await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)
    await approve_when_asked(client, rid)
    await runs.wait_result(client, rid)
    history = await client.get_workflow_handle(rid).fetch_history()
    replayer = Replayer(workflows=[AgentWorkflow], data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None


async def test_a_model_call_slower_than_its_timeout_is_retried(dev_env, settings):
    client, rid = dev_env.client, run_id("slow")
    request = RunRequest.model_validate(
        {
            "goal": "long",
            "scenario": "long?steps=2&fault=step1:delay=5",
            "limits": {"model_timeout_seconds": 1},
        }
    )
    await runs.start_run(client, settings, request, rid)
    assert (await runs.wait_result(client, rid)).status == "completed"
    history = await client.get_workflow_handle(rid).fetch_history()
    timeouts = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT
    ]
    assert timeouts == []  # retried within the activity's retry policy, not surfaced
    assert max(started_attempts(history, "call_model")) == 2
    assert count_effects(settings, rid, "note") == 2


async def test_a_step_scoped_context_sends_the_model_the_same_amount_at_any_length(
    dev_env, settings, model_server
):
    client, rid = dev_env.client, run_id("scoped")
    request = RunRequest.model_validate(
        {
            "goal": "long",
            "scenario": "long?steps=30&reply_bytes=512",
            "limits": {"context": "step"},
        }
    )
    await runs.start_run(client, settings, request, rid)
    result = await runs.wait_result(client, rid)
    assert result.status == "completed" and count_effects(settings, rid, "note") == 30
    state = await runs.get_state(client, rid)
    # Input tokens grow with the conversation under a full context; here each step's
    # call sees the goal and its own step, so the total stays linear in the steps.
    per_call = state.usage.input_tokens / state.usage.model_calls
    assert per_call < 200, per_call


def step_inputs(history) -> list[tuple[str, dict[str, object]]]:
    return [
        (attrs.activity_type.name, json.loads(attrs.input.payloads[0].data))
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and (attrs := e.activity_task_scheduled_event_attributes).activity_type.name
        in ("call_model", "run_tool")
    ]


async def test_a_step_names_its_run_once_and_the_worker_gives_it_its_identity(dev_env, settings):
    """A step's inputs name their run by its tag (13 characters, not the identity's 60):
    the worker's caller check compares it with the calling run's identity from Temporal's
    record, the chain's first run's even after a continue-as-new, and fills that in, so its
    effects are kept under it as before; only each Temporal run's first model call names
    it whole, for a what-if to read."""
    client, rid = dev_env.client, run_id("named")
    request = RunRequest.model_validate(
        {"goal": "b", "label": "long?steps=6", "limits": {"continue_as_new_after_events": 50}}
    )
    await runs.start_run(client, settings, request, rid)
    await runs.wait_result(client, rid)
    chain = await fetch_chain(client, rid)
    assert len(chain) >= 2, "the run continued as new"
    started = chain[0][1].events[0].workflow_execution_started_event_attributes
    identity = f"{rid}@{started.first_execution_run_id}"
    for _, history in chain:
        inputs = step_inputs(history)
        assert inputs[0][0] == "call_model" and inputs[0][1]["run_id"] == identity
        assert all(data["run_id"] == run_tag(identity) for _, data in inputs[1:]), inputs
    notes = Providers.open(settings.data_dir).records.effects(rid)
    assert len(notes) == 6
    assert all(e["run_id"] == identity for e in notes), notes
    assert all(e["idempotency_key"].startswith(f"{identity}/step-") for e in notes), notes


async def test_a_bare_approve_signal_decides_the_only_waiting_request(dev_env, settings):
    """`temporal workflow signal --name approve --input '{}'`: the decision travels with
    its verdict (the signal's name) and counts, by "anonymous" as the payload's default."""
    client, rid = dev_env.client, run_id("bare")
    await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)
    for _ in range(600):
        if (await runs.get_summary(client, rid)).status == RunStatus.AWAITING_APPROVAL:
            break
        await asyncio.sleep(0.05)
    await client.get_workflow_handle(rid).signal("approve", {})
    assert (await runs.wait_result(client, rid)).status == "completed"
    decided = (await runs.get_state(client, rid)).approvals
    assert [(a.status.value, a.decided_by) for a in decided] == [("approved", "anonymous")]


async def test_a_run_that_continued_as_new_is_attached_to_by_the_same_request(dev_env, settings):
    """Its running execution was started by a continue-as-new with the options as the run
    settled them (no policy asked: the default one); the same request still attaches."""
    client, rid = dev_env.client, run_id("attach-continued")
    request = RunRequest(
        goal="pay", label="pay-invoice", limits=RunLimits(continue_as_new_after_events=50)
    )
    await runs.start_run(client, settings, request, rid)

    async def continued_and_waiting() -> bool:
        description = await client.get_workflow_handle(rid).describe()
        info = description.raw_description.workflow_execution_info
        state = await runs.get_state(client, rid)
        assert info.first_run_id, "the dev server names a chain's first execution"
        continued = state.chain >= 2 and info.first_run_id != description.run_id
        return continued and bool(state.pending_approvals)

    await eventually(continued_and_waiting)
    again = await runs.start_run(client, settings, request, rid)
    assert again.attached
    other = request.model_copy(update={"goal": "pay twice"})
    with pytest.raises(runs.RunError, match="already running with another request"):
        await runs.start_run(client, settings, other, rid)
    await approve_when_asked(client, rid)
    await runs.wait_result(client, rid)
    assert count_effects(settings, rid, "charge") == 1
