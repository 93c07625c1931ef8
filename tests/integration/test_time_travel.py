"""Time travel: rebuild every moment of a run from its history, fork, rewind, export and
replay, on the dev server with a real worker."""

from __future__ import annotations

import asyncio

import pytest
from temporalio import workflow

from durable_agents.control import runs, timeline
from durable_agents.examples.providers import Providers
from durable_agents.worker.main import build_worker
from durable_agents.workflows import timeline as timeline_hook
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RunRequest, RunResult
from durable_agents.workflows.people_inputs import Actor, Decision, StatePatch
from durable_agents.workflows.records import RunStatus
from durable_agents.workflows.state import RunState
from tests.conftest import approve_when_asked, count_effects, run_id, wait_for_approval

pytestmark = pytest.mark.usefixtures("worker")


async def paid_run(client, settings, prefix):
    rid = run_id(prefix)
    await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)
    await approve_when_asked(client, rid)
    await runs.wait_result(client, rid)
    return rid


def moment_of(found, kind):
    return next(m for m in found.moments if m.kind == kind)


def comparable(state: RunState) -> dict[str, object]:
    """The state as JSON, less the times of its kept events: workflow.now() in the task
    that resolves the start's local activity is that activity's end when live, and the
    task's start when replayed, so a moment right after it reads a few ms apart. Every
    other field, and every event's offset, kind and detail, must be equal."""
    dumped = state.model_dump(mode="json")
    for event in dumped["events"]:
        event.pop("at")
    return dumped


async def test_every_moment_rebuilt_from_history_equals_the_live_state(dev_env, settings):
    client, rid = dev_env.client, run_id("tt")
    await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)
    seen: dict[int, dict[str, object]] = {}
    approved = False
    while True:
        state = await runs.get_state(client, rid)
        seen[state.moment] = comparable(state)
        if state.pending_approvals and not approved:
            await asyncio.sleep(0.2)  # let the waiting moment be seen more than once
            await runs.approve(client, rid, Decision(by="alice"))
            approved = True
        if state.status.is_closed:
            break
        await asyncio.sleep(0.005)

    found = await timeline.rebuild(client, rid)
    assert [m.index for m in found.moments] == list(range(1, len(found.moments) + 1))
    assert len(seen) >= 3, "the poll must have caught several moments"
    for index, live in seen.items():
        assert comparable(found.at(index).state) == live, f"moment {index}"
    kinds = [m.kind for m in found.moments]
    assert kinds[:2] == ["started", "model"] and kinds[-1] == "completed"
    assert "approval requested" in kinds and "approved" in kinds and "tool" in kinds


async def test_diff_says_what_a_moment_changed(dev_env, settings):
    client = dev_env.client
    rid = await paid_run(client, settings, "diff")
    found = await timeline.rebuild(client, rid)
    approved = moment_of(found, "approved")
    before = found.at(approved.index - 1).state.model_dump(mode="json")
    changes = dict(
        (path, new)
        for path, _, new in timeline.diff(before, approved.state.model_dump(mode="json"))
    )
    assert changes["approvals[0].status"] == "approved"
    assert changes["approvals[0].decided_by"] == "alice"
    assert changes["moment"] == approved.index


async def test_fork_before_the_payment_pays_once_under_its_own_key(dev_env, settings):
    client = dev_env.client
    parent = await paid_run(client, settings, "parent")
    found = await timeline.rebuild(client, parent)
    asked = moment_of(found, "approval requested")

    child = await timeline.fork(client, settings, parent, asked.index, new_id=f"{parent}-fork")
    await approve_when_asked(client, child.run_id, by="bob")
    result = await runs.wait_result(client, child.run_id)
    state = await runs.get_state(client, child.run_id)

    assert result.status == "completed"
    assert state.parent is not None and state.parent.run_id == parent
    assert state.parent.moment == asked.index
    description = await client.get_workflow_handle(child.run_id).describe()
    assert (await description.memo_value("parent_run_id")) == parent
    # The parent's payment is not repeated; the fork pays once, under its own key.
    assert count_effects(settings, parent, "charge") == 1
    charges = [e for e in Providers.open(settings.data_dir).payments.effects(child.run_id)]
    assert [e["idempotency_key"] for e in charges] == [f"{state.store_key}/step-3/call_step3_t0_0"]
    # Steps before the fork point are not redone: no new draft, one email sent by the fork.
    assert count_effects(settings, child.run_id, "draft") == 0
    assert count_effects(settings, child.run_id, "send") == 1
    assert [s.status.value for s in state.plan] == ["done"] * 4


async def test_fork_with_an_edit_and_a_refused_edit(dev_env, settings):
    client = dev_env.client
    parent = await paid_run(client, settings, "parent-e")
    found = await timeline.rebuild(client, parent)
    asked = moment_of(found, "approval requested")
    with pytest.raises(runs.RunError, match="the edit is refused"):
        await timeline.fork(client, settings, parent, asked.index, edit=StatePatch(by="ed"))
    edit = StatePatch(by="ed", pending_steps=["Pay the invoice"])
    child = await timeline.fork(client, settings, parent, asked.index, edit=edit)
    await approve_when_asked(client, child.run_id)
    await runs.wait_result(client, child.run_id)
    state = await runs.get_state(client, child.run_id)
    assert [s.title for s in state.plan] == [
        "Look up invoice INV-1001",
        "Draft the payment confirmation email",
        "Pay the invoice",
    ]


async def test_rewind_past_the_payment_still_pays_once(dev_env, settings):
    client = dev_env.client
    rid = await paid_run(client, settings, "rewind")
    found = await timeline.rebuild(client, rid)
    asked = moment_of(found, "approval requested")
    key = f"{found.moments[-1].state.store_key}/step-3/call_step3_t0_0"
    assert Providers.open(settings.data_dir).payments.replays(key) == 0
    assert key in [e["idempotency_key"] for e in Providers.open(settings.data_dir).effects(rid)]

    new_run = await timeline.rewind(client, rid, asked.index, by="ops")
    handle = client.get_workflow_handle(rid)
    assert (await handle.describe()).run_id == new_run
    await runs.wait_result(client, rid)  # the approval after that point is applied again
    state = await runs.get_state(client, rid)
    assert state.status is RunStatus.COMPLETED
    assert count_effects(settings, rid, "charge") == 1
    assert Providers.open(settings.data_dir).payments.replays(key) == 0  # the ledger answered


async def test_a_failed_run_is_inspected_and_continued_from_its_last_good_step(dev_env, settings):
    client, rid = dev_env.client, run_id("failed")
    # The model endpoint refuses one call at step 2 (a revoked key, say): the run fails.
    request = RunRequest(goal="pay", label="pay-invoice?fault=step2:401*1")
    await runs.start_run(client, settings, request, rid)
    assert (await runs.wait_for_outcome(client, rid))["status"] == "failed"

    found = await timeline.rebuild(client, rid)
    last = found.moments[-1]
    assert last.kind == "failed" and "HTTP 401" in last.state.errors[0]
    last_good = found.moments[-2]
    assert last_good.kind == "model" and last_good.state.current_step == 2
    assert [s.status.value for s in last_good.state.plan][:1] == ["done"]

    # The cause is fixed (the fault fired once); rewind to the last good step.
    await timeline.rewind(client, rid, last_good.index, by="ops")
    await approve_when_asked(client, rid)
    assert (await runs.wait_result(client, rid)).status == "completed"
    assert count_effects(settings, rid, "charge") == 1


async def test_export_then_replay(dev_env, settings, tmp_path):
    client = dev_env.client
    rid = await paid_run(client, settings, "export")
    path = tmp_path / f"{rid}.json"
    timeline.export_history(await timeline.fetch_history(client, rid), path)
    [outcome] = await timeline.replay_files([path])
    assert outcome.ok, outcome.message
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    [refused] = await timeline.replay_files([bad])
    assert not refused.ok and refused.message.startswith("not a history file")


async def test_the_timeline_of_a_run_still_running(dev_env, settings):
    client, rid = dev_env.client, run_id("live")
    await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)

    await wait_for_approval(client, rid)
    found = await timeline.rebuild(client, rid)
    assert found.moments[-1].kind == "approval requested"
    live = await runs.get_state(client, rid)
    assert comparable(found.moments[-1].state) == comparable(live)
    await runs.cancel(client, rid, Actor(by="t"))


async def test_a_long_run_continues_as_new_and_its_timeline_spans_the_chain(dev_env, settings):
    client, rid = dev_env.client, run_id("chain")
    request = RunRequest.model_validate(
        {
            "goal": "long",
            "scenario": "long?steps=25&reply_bytes=64",
            "limits": {"continue_as_new_after_events": 60},
        }
    )
    await runs.start_run(client, settings, request, rid)
    result = await runs.wait_result(client, rid)  # follows the chain to its end
    state = await runs.get_state(client, rid)

    assert result.status == "completed"
    assert state.chain >= 3 and len(state.steps.completed) == 25
    assert count_effects(settings, rid, "note") == 25  # each step's effect once
    found = await timeline.rebuild(client, rid)
    assert len(found.chain) == state.chain
    assert [m.index for m in found.moments] == list(range(1, state.moment + 1))
    assert comparable(found.moments[-1].state) == comparable(state)
    assert sum(m.kind == "continued as new" for m in found.moments) == state.chain - 1
    # A step replays only the run of the chain that holds it, from the state it began with:
    # each side of every continue-as-new and the last step, each equal to the full rebuild.
    ends = [m.index for m in found.moments if m.kind == "continued as new"]
    for index in sorted({1, *ends, *(e + 1 for e in ends), state.moment}):
        one = await timeline.rebuild(client, rid, only={index})
        moment = found.at(index)
        assert [run for run, _ in one.chain] == [moment.run_id]
        assert comparable(one.at(index).state) == comparable(moment.state)
        assert one.at(index).history_length == moment.history_length
        # Only the step asked for keeps its whole state; the others a glance at it.
        assert [m.index for m in one.moments if m.state_json is not None] == [index]
        with pytest.raises(LookupError, match="was not kept"):
            _ = next(m for m in one.moments if m.index != index).state
    # A timeline that only lists keeps no state whole, and glances at each as it was.
    listed = await timeline.rebuild(client, rid, states=False)
    assert all(m.state_json is None for m in listed.moments)
    glances = [(m.index, m.status, m.current_step, m.next_seq, m.store_key) for m in listed.moments]
    assert glances == [
        (m.index, m.state.status.value, m.state.current_step, m.state.next_seq, m.state.store_key)
        for m in found.moments
    ]
    with pytest.raises(runs.RunError, match=f"has steps .* there is no step {state.moment + 1}"):
        (await timeline.rebuild(client, rid, only={state.moment + 1})).at(state.moment + 1)
    # Fork from a step in the first run of the chain.
    early = next(m for m in found.moments if m.kind == "tool" and m.run_id == found.chain[0][0])
    with pytest.raises(runs.RunError, match="earlier run"):
        await timeline.rewind(client, rid, early.index, by="ops")
    child = await timeline.fork(client, settings, rid, early.index)
    assert (await runs.wait_result(client, child.run_id)).status == "completed"


@workflow.defn(name="AgentWorkflow", sandboxed=False)
class UnsandboxedAgent(AgentWorkflow):
    """The agent outside the sandbox: it shares workflows.timeline with this process, as
    a worker with that module passed through would."""

    @workflow.run
    async def run(self, request: RunRequest) -> RunResult:
        return await super().run(request)


async def test_a_live_run_in_the_same_process_adds_nothing_to_a_recording(dev_env, settings):
    """Recordings listen only while replaying: a live worker of this very process, moving
    the run under an open recording of its id, adds no moment to it."""
    client, rid = dev_env.client, run_id("live")
    settings = settings.model_copy(update={"task_queue": f"{settings.task_queue}-live"})
    async with build_worker(client, settings, workflows=[UnsandboxedAgent]):
        await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)
        await wait_for_approval(client, rid)
        with timeline_hook.recording(rid) as moments:
            await runs.approve(client, rid, Decision(by="alice"))
            assert (await runs.wait_result(client, rid)).status == "completed"
    assert moments == {}
    found = await timeline.rebuild(client, rid)
    assert found.moments[-1].kind == "completed"
