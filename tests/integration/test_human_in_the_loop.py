"""People acting on live runs, on the dev server with a real worker: every action's
happy path, every refusal (state unchanged), races, and a worker that is down."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
)

from durable_agents.control import runs
from durable_agents.worker.main import build_worker
from durable_agents.workflows import search_attributes as sa
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor, Answer, DecideRequest, StatePatch
from durable_agents.workflows.records import ApprovalStatus, RunStatus
from tests.conftest import count_effects, eventually, run_id
from tests.temporal_cli import temporal


async def start(client, settings, scenario, prefix, **fields):
    rid = run_id(prefix)
    request = RunRequest.model_validate({"goal": prefix, "scenario": scenario, **fields})
    await runs.start_run(client, settings, request, rid)
    return rid


async def until(client, rid, predicate, within=60.0):
    """Once the run's summary says so: a deadline for a loaded machine (a clean-clone run
    once took over 20 s to bring a payment to its approval), not a timing assertion."""

    async def check():
        summary = await runs.get_summary(client, rid)
        return summary if predicate(summary) else None

    return await eventually(check, within=within)


def waiting_approval(summary):
    return bool(summary.pending_approvals)


async def refused_unchanged(client, rid, action, message):
    """The action is refused with `message` and the run's state is exactly as before."""
    before = await runs.get_state(client, rid)
    with pytest.raises(runs.RunError, match=message):
        await action()
    after = await runs.get_state(client, rid)
    assert after.model_dump() == before.model_dump()


@pytest.mark.usefixtures("worker")
class TestDecisions:
    async def test_decide_update_approves_and_records_who_when_and_why(self, dev_env, settings):
        client = dev_env.client
        rid = await start(client, settings, "pay-invoice", "decide")
        summary = await until(client, rid, waiting_approval)
        request = summary.pending_approvals[0]
        assert request.rule == "pay_invoice is declared as needing approval"
        assert (await client.get_workflow_handle(rid).query("pending_approvals"))[0]["tool"] == (
            "pay_invoice"
        )
        said = await runs.decide(
            client, rid, DecideRequest(approve=True, by="alice", comment="matches the PO")
        )
        assert said == f"approved: pay_invoice ({request.request_id}) by alice"
        await runs.wait_result(client, rid)
        state = await runs.get_state(client, rid)
        decided = state.approvals[0]
        assert (decided.decided_by, decided.comment) == ("alice", "matches the PO")
        assert decided.decided_at is not None and decided.decided_at >= decided.requested_at
        assert any(e.action == "approved" and e.actor == "alice" for e in state.audit)
        assert count_effects(settings, rid, "charge") == 1

    async def test_refusals_leave_the_state_unchanged(self, dev_env, settings):
        client = dev_env.client
        policy = {"approvers": {"pay_invoice": ["cfo"]}, "approve_all_side_effects": True}
        rid = await start(client, settings, "pay-invoice", "refuse", policy=policy)
        draft = (await until(client, rid, waiting_approval)).pending_approvals[0]
        assert draft.tool == "draft_email"
        await refused_unchanged(
            client,
            rid,
            lambda: runs.decide(
                client, rid, DecideRequest(request_id="nope", approve=True, by="cfo")
            ),
            "refused: no approval request 'nope'",
        )
        await runs.decide(client, rid, DecideRequest(approve=False, by="intern", comment="later"))
        await until(client, rid, lambda s: [a.tool for a in s.pending_approvals] == ["pay_invoice"])
        await refused_unchanged(
            client,
            rid,
            lambda: runs.decide(client, rid, DecideRequest(approve=True, by="intern")),
            "refused: intern may not decide pay_invoice requests in this run",
        )
        again = DecideRequest(request_id=draft.request_id, approve=True, by="cfo")
        await refused_unchanged(
            client,
            rid,
            lambda: runs.decide(client, rid, again),
            f"refused: request {draft.request_id} was already rejected by intern",
        )
        await runs.decide(client, rid, DecideRequest(approve=False, by="cfo"))
        await runs.wait_result(client, rid)
        assert count_effects(settings, rid, "charge") == 0
        assert count_effects(settings, rid, "draft") == 0

    async def test_two_approvers_race_and_exactly_one_wins(self, dev_env, settings):
        client = dev_env.client
        rid = await start(client, settings, "pay-invoice", "race")
        await until(client, rid, waiting_approval)
        outcomes = await asyncio.gather(
            runs.decide(client, rid, DecideRequest(approve=True, by="alice")),
            runs.decide(client, rid, DecideRequest(approve=False, by="bob")),
            return_exceptions=True,
        )
        wins = [o for o in outcomes if isinstance(o, str)]
        refusals = [o for o in outcomes if isinstance(o, runs.RunError)]
        assert len(wins) == 1 and len(refusals) == 1, outcomes
        assert "was already" in str(refusals[0]) or "no approval is pending" in str(refusals[0])
        state = await runs.get_state(client, rid)
        assert len([a for a in state.approvals if a.status is not ApprovalStatus.PENDING]) == 1
        assert len([e for e in state.audit if e.action in ("approved", "rejected")]) == 1
        await runs.wait_result(client, rid)

    async def test_an_approval_from_the_temporal_cli_is_acted_on(self, dev_env, settings):
        client = dev_env.client
        rid = await start(client, settings, "pay-invoice", "tcli")
        await until(client, rid, waiting_approval)
        payload = json.dumps({"by": "ops-script", "comment": "from the temporal CLI"})
        sent = await temporal(
            client, "workflow", "signal", "--workflow-id", rid, "--name", "approve",
            "--input", payload,
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        await runs.wait_result(client, rid)
        state = await runs.get_state(client, rid)
        assert state.approvals[0].decided_by == "ops-script"
        assert count_effects(settings, rid, "charge") == 1

    async def test_payments_above_the_threshold_wait_and_below_do_not(self, dev_env, settings):
        client = dev_env.client
        gated = await start(
            client, settings, "refund", "above", policy={"approve_payments_above": "10"}
        )
        summary = await until(client, gated, waiting_approval)
        assert "above the run's approval threshold 10" in summary.pending_approvals[0].rule
        free = await start(
            client, settings, "refund", "below", policy={"approve_payments_above": "100"}
        )
        assert (await runs.wait_result(client, free)).status == "completed"
        assert count_effects(settings, free, "refund") == 1
        assert count_effects(settings, gated, "refund") == 0
        await runs.decide(client, gated, DecideRequest(approve=True, by="alice"))
        await runs.wait_result(client, gated)
        assert count_effects(settings, gated, "refund") == 1


@pytest.mark.usefixtures("worker")
class TestQuestionsAndEdits:
    async def test_answer_by_update_is_validated_against_the_options(self, dev_env, settings):
        client = dev_env.client
        rid = await start(client, settings, "ask-human", "ask")
        summary = await until(client, rid, lambda s: bool(s.pending_questions))
        assert summary.status is RunStatus.AWAITING_INPUT and summary.waiting_for == "input"
        question = summary.pending_questions[0]
        assert question.options == ["INV-1001", "INV-1002"]
        handle = client.get_workflow_handle(rid)
        [asked] = await handle.query("pending_questions")
        assert asked["question"] == "Which invoice should I look up?"
        metadata = await handle.query("__temporal_workflow_metadata")
        assert "awaiting an answer: Which invoice should I look up?" in metadata.current_details
        await refused_unchanged(
            client,
            rid,
            lambda: runs.answer(client, rid, Answer(answer="INV-9999", by="alice")),
            "refused: answer must be one of INV-1001, INV-1002",
        )
        said = await runs.answer(client, rid, Answer(answer="INV-1002", by="alice"))
        assert said == f"answered {question.question_id}: INV-1002"
        await runs.wait_result(client, rid)
        state = await runs.get_state(client, rid)
        assert state.questions[0].answered_by == "alice"
        looked_up = [r.summary for r in state.results if r.tool == "lookup_invoice"]
        assert len(looked_up) == 1 and "INV-1002" in looked_up[0]

    async def test_answer_by_signal(self, dev_env, settings):
        client = dev_env.client
        rid = await start(client, settings, "ask-human", "asksig")
        await until(client, rid, lambda s: bool(s.pending_questions))
        await client.get_workflow_handle(rid).signal("answer", Answer(answer="INV-1001", by="bo"))
        assert (await runs.wait_result(client, rid)).status == "completed"

    async def test_pause_edit_resume(self, dev_env, settings):
        client = dev_env.client
        rid = await start(client, settings, "long?steps=40&reply_bytes=64", "edit")
        await until(client, rid, lambda s: s.steps_done >= 2)
        await runs.pause(client, rid, Actor(by="eve", reason="look first"))
        paused = await until(client, rid, lambda s: s.status is RunStatus.PAUSED)
        assert paused.waiting_for == "resume"
        # Paused means stopped between activities: none is scheduled or running.
        described = await client.get_workflow_handle(rid).describe()
        assert list(described.raw_description.pending_activities) == []
        assert (await runs.get_summary(client, rid)).steps_done == paused.steps_done

        await refused_unchanged(
            client,
            rid,
            lambda: runs.edit(client, rid, StatePatch(by="eve")),
            "refused: the patch changes nothing",
        )
        handle = client.get_workflow_handle(rid)
        before = await runs.get_state(client, rid)
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update("edit", {"by": "eve", "pending_steps": 5})
        assert (await runs.get_state(client, rid)).model_dump() == before.model_dump()
        with pytest.raises(ValidationError):
            StatePatch.model_validate({"by": "eve", "pending_steps": [""]})

        edited = await runs.edit(
            client, rid, StatePatch(by="eve", pending_steps=["Wrap up"], goal="Stop early")
        )
        # Done steps and the step in flight stay; the pending ones are replaced.
        kept = paused.steps_done + (1 if paused.current_step else 0)
        assert [s.title for s in edited.plan][kept:] == ["Wrap up"]
        await runs.resume(client, rid, Actor(by="eve"))
        result = await runs.wait_result(client, rid)
        state = await runs.get_state(client, rid)
        assert result.status == "completed" and state.goal == "Stop early"
        assert len(state.plan) == kept + 1 and len(state.steps.completed) == kept + 1
        assert [(e.actor, e.action) for e in state.audit if e.actor == "eve"] == [
            ("eve", "pause_requested"),
            ("eve", "edited"),
            ("eve", "resumed"),
        ]

    async def test_inbox_lists_runs_waiting_for_a_human(self, dev_env, settings):
        client = dev_env.client
        approval = await start(client, settings, "pay-invoice", "inbox-a")
        question = await start(client, settings, "ask-human", "inbox-q")
        await until(client, approval, waiting_approval)
        await until(client, question, lambda s: bool(s.pending_questions))

        async def both_listed():
            # This deployment's runs: earlier tests' runs, whose workers are gone, cost a
            # query timeout each. A run's detail needs its worker's answer within 2 s,
            # which a busy machine may miss once: asked again until it comes.
            items = await runs.inbox(client, task_queue=settings.task_queue)
            found = {i.run_id: i for i in items if not i.detail.startswith("(no worker")}
            return found if {approval, question} <= set(found) else None

        found = await eventually(both_listed)
        assert found[approval].waiting_for == "approval" and "pay_invoice" in found[approval].detail
        assert found[question].waiting_for == "input" and "Which invoice" in found[question].detail
        await runs.cancel(client, approval, Actor(by="t"))
        await runs.cancel(client, question, Actor(by="t"))


@pytest.mark.usefixtures("worker")
class TestCancel:
    async def test_a_cancelled_run_never_performs_the_effect_it_waited_for(self, dev_env, settings):
        client = dev_env.client
        rid = await start(client, settings, "pay-invoice", "cancel")
        await until(client, rid, waiting_approval)
        await runs.cancel(client, rid, Actor(by="carol", reason="vendor disputed"))
        result = await runs.wait_result(client, rid)
        assert result.status == "cancelled"
        with pytest.raises(runs.RunError, match=r"is closed \(cancelled\)"):
            await runs.decide(client, rid, DecideRequest(approve=True, by="late"))
        state = await runs.get_state(client, rid)
        assert state.status is RunStatus.CANCELLED and state.cancel_requested_by == "carol"
        assert state.approvals[0].status is ApprovalStatus.REJECTED
        assert count_effects(settings, rid, "charge") == 0

    async def test_cancel_from_temporal_itself_ends_canceled(self, dev_env, settings):
        client = dev_env.client
        rid = await start(client, settings, "pay-invoice", "tcancel")
        await until(client, rid, waiting_approval)
        handle = client.get_workflow_handle(rid)
        await handle.cancel()  # what the Web UI's Cancel button does
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        description = await handle.describe()
        assert description.status == WorkflowExecutionStatus.CANCELED
        assert (await runs.wait_for_outcome(client, rid))["status"] == "cancelled"
        assert description.typed_search_attributes.get(sa.STATUS) == "cancelled"
        assert count_effects(settings, rid, "charge") == 0

    async def test_cancel_reaches_the_activity_in_flight_through_its_heartbeat(
        self, dev_env, settings
    ):
        client = dev_env.client
        rid = await start(client, settings, "long?steps=3&fault=step2:delay=60", "cancel-hb")
        await until(client, rid, lambda s: s.current_step == 2)

        async def slow_call_started() -> bool:
            described = await client.get_workflow_handle(rid).describe()
            return any(
                a.activity_type.name == "call_model"
                and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
                for a in described.raw_description.pending_activities
            )

        await eventually(slow_call_started)  # the cancel must reach a running activity
        await runs.cancel(client, rid, Actor(by="carol"))
        result = await asyncio.wait_for(runs.wait_result(client, rid), timeout=20)
        assert result.status == "cancelled"
        history = await client.get_workflow_handle(rid).fetch_history()
        kinds = {e.event_type for e in history.events}
        assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in kinds
        assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED in kinds
        assert count_effects(settings, rid, "note") == 1  # step 1 only


async def test_a_decision_sent_while_no_worker_runs_is_kept(dev_env, settings):
    client = dev_env.client
    async with build_worker(client, settings):
        rid = await start(client, settings, "pay-invoice", "offline")
        await until(client, rid, waiting_approval)
    said = await runs.decide(client, rid, DecideRequest(approve=True, by="night-shift"))
    assert said.startswith("no worker answered")
    async with build_worker(client, settings):
        await runs.wait_result(client, rid)
        state = await runs.get_state(client, rid)
    assert state.approvals[0].decided_by == "night-shift"
    assert count_effects(settings, rid, "charge") == 1
