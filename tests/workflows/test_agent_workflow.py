"""The agent workflow on the time-skipping server, with real activities and the offline
model over HTTP: the plan, the approval gate, and what goes back to the model."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from durable_agents.activities.stores import Stores
from durable_agents.control import runs
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor, Decision
from durable_agents.workflows.records import ApprovalStatus, QuestionStatus, RunStatus, StepStatus
from tests.conftest import count_effects, eventually, key_of, run_id

pytestmark = pytest.mark.usefixtures("ts_worker")


@pytest.fixture(scope="module")
def time_env(own_time_env: WorkflowEnvironment) -> WorkflowEnvironment:
    """This module moves the clock: a server of its own (conftest `own_time_env`)."""
    return own_time_env


async def waiting_approval(client, rid):
    async def check():
        summary = await runs.get_summary(client, rid)
        return summary if summary.pending_approvals else None

    return await eventually(check)


async def test_pay_invoice_waits_for_approval_then_pays_once(time_env, ts_settings):
    client, rid = time_env.client, run_id("pay")
    await runs.start_run(client, ts_settings, RunRequest(goal="pay", label="pay-invoice"), rid)
    summary = await waiting_approval(client, rid)
    request = summary.pending_approvals[0]
    assert summary.status is RunStatus.AWAITING_APPROVAL
    assert request.tool == "pay_invoice" and request.step == 3
    assert request.arguments == {"invoice_id": "INV-1001", "amount": "1250.00", "currency": "EUR"}
    assert "1250.00 EUR" in request.reason
    # Nothing was paid while the run waited.
    assert count_effects(ts_settings, rid, "charge") == 0

    await runs.approve(client, rid, Decision(by="alice", comment="ok"))
    result = await runs.wait_result(client, rid)
    state = await runs.get_state(client, rid)

    assert result.status == "completed"
    assert "is paid" in (result.final_answer or "")
    assert [s.status for s in state.plan] == [StepStatus.DONE] * 4
    assert state.approvals[0].status is ApprovalStatus.APPROVED
    assert state.approvals[0].decided_by == "alice"
    assert count_effects(ts_settings, rid, "charge") == 1
    assert count_effects(ts_settings, rid, "send") == 1
    assert state.usage.model_calls == 10 and state.usage.input_tokens > 0


async def test_rejection_goes_back_to_the_model_and_nothing_is_paid(time_env, ts_settings):
    client, rid = time_env.client, run_id("reject")
    await runs.start_run(client, ts_settings, RunRequest(goal="pay", label="pay-invoice"), rid)
    await waiting_approval(client, rid)
    await runs.reject(client, rid, Decision(by="bob", comment="not this month"))
    result = await runs.wait_result(client, rid)

    assert "not paid" in (result.final_answer or "")
    assert count_effects(ts_settings, rid, "charge") == 0
    assert count_effects(ts_settings, rid, "send") == 0
    messages = Stores.open(ts_settings).transcript.read(await key_of(client, rid))
    tool_texts = [m["content"] for m in messages if m["role"] == "tool"]
    assert any(t.startswith("rejected by bob: not this month") for t in tool_texts)


async def signals_applied(client, rid) -> None:
    """Wait until every signal sent so far has been applied: signals apply in order, so a
    probe (pause, then resume) seen by the workflow comes after them all."""
    await runs.pause(client, rid, Actor(by="probe"))

    async def probe_seen() -> bool:
        return (await runs.get_state(client, rid)).pause_requested

    await eventually(probe_seen)
    await runs.resume(client, rid, Actor(by="probe"))

    async def probe_gone() -> bool:
        return not (await runs.get_state(client, rid)).pause_requested

    await eventually(probe_gone)


async def test_a_decision_for_no_pending_request_changes_nothing(time_env, ts_settings, caplog):
    client, rid = time_env.client, run_id("stray")
    await runs.start_run(client, ts_settings, RunRequest(goal="pay", label="pay-invoice"), rid)
    await waiting_approval(client, rid)
    before = await runs.get_state(client, rid)
    with caplog.at_level(logging.WARNING, logger="temporalio.workflow"):
        await runs.approve(client, rid, Decision(request_id="no-such-request", by="mallory"))
        await signals_applied(client, rid)
    after = await runs.get_state(client, rid)
    assert after.approvals == before.approvals
    assert after.status is RunStatus.AWAITING_APPROVAL
    assert "decision ignored: no approval request 'no-such-request'" in caplog.text
    await runs.approve(client, rid, Decision(by="alice"))
    assert (await runs.wait_result(client, rid)).status == "completed"


@pytest.mark.parametrize(
    ("fault", "error_text"),
    [
        ("step1:malformed_args", "error: invalid arguments for lookup_invoice"),
        ("step1:unknown_tool", "error: unknown tool 'launch_rockets'"),
    ],
)
async def test_bad_tool_calls_go_back_to_the_model(time_env, ts_settings, fault, error_text):
    client, rid = time_env.client, run_id("badcall")
    scenario = f"pay-invoice?fault={fault}"
    await runs.start_run(client, ts_settings, RunRequest(goal="pay", label=scenario), rid)
    await waiting_approval(client, rid)
    await runs.approve(client, rid, Decision(by="alice"))
    result = await runs.wait_result(client, rid)

    assert result.status == "completed"
    messages = Stores.open(ts_settings).transcript.read(await key_of(client, rid))
    errors = [m for m in messages if m["role"] == "tool" and m["content"].startswith(error_text)]
    assert len(errors) == 1
    # The bad call ran no tool; the corrected one ran exactly once.
    state = await runs.get_state(client, rid)
    assert [r.tool for r in state.results if r.step == 1] == ["lookup_invoice"]


async def test_a_step_that_never_ends_fails_the_run_with_a_clear_error(time_env, ts_settings):
    client, rid = time_env.client, run_id("loop")
    request = RunRequest.model_validate(
        {
            "goal": "loop",
            "scenario": "pay-invoice?fault=step1:malformed_args*50",
            "limits": {"max_turns_per_step": 3},
        }
    )
    await runs.start_run(client, ts_settings, request, rid)
    with pytest.raises(WorkflowFailureError) as failure:
        await runs.wait_result(client, rid)
    assert "step 1 did not finish within 3 model turns" in str(failure.value.cause)
    state = await runs.get_state(client, rid)
    assert state.status is RunStatus.FAILED
    assert state.errors == ["step 1 did not finish within 3 model turns"]


async def test_side_effects_need_approval_when_the_policy_says_so(time_env, ts_settings):
    client, rid = time_env.client, run_id("strict")
    request = RunRequest.model_validate(
        {"goal": "pay", "scenario": "pay-invoice", "policy": {"approve_all_side_effects": True}}
    )
    await runs.start_run(client, ts_settings, request, rid)
    tools = []
    for _ in range(3):
        summary = await waiting_approval(client, rid)
        request = summary.pending_approvals[0]
        tools.append(request.tool)
        await runs.approve(client, rid, Decision(by="alice"))
        await eventually(lambda request_id=request.request_id: _no_pending(client, rid, request_id))
    assert tools == ["draft_email", "pay_invoice", "send_email"]
    assert (await runs.wait_result(client, rid)).status == "completed"


async def _no_pending(client, rid, request_id):
    summary = await runs.get_summary(client, rid)
    return all(p.request_id != request_id for p in summary.pending_approvals)


async def test_an_approval_past_its_deadline_is_rejected(time_env, ts_settings):
    """The default 24 h deadline, passed on the time-skipping server in milliseconds."""
    client, rid = time_env.client, run_id("deadline")
    await runs.start_run(client, ts_settings, RunRequest(goal="pay", label="pay-invoice"), rid)
    await waiting_approval(client, rid)
    await time_env.sleep(timedelta(hours=25))
    result = await runs.wait_result(client, rid)
    state = await runs.get_state(client, rid)
    assert state.approvals[0].status is ApprovalStatus.REJECTED
    assert state.approvals[0].decided_by == "deadline"
    assert "not paid" in (result.final_answer or "")
    assert count_effects(ts_settings, rid, "charge") == 0


async def escalated_run(time_env, ts_settings, rid) -> None:
    """A pay-invoice run whose approval passed its first deadline and went to "boss"."""
    client = time_env.client
    policy = {"decision_timeout_seconds": 3600, "on_timeout": "escalate", "escalate_to": ["boss"]}
    request = RunRequest.model_validate(
        {"goal": "pay", "scenario": "pay-invoice", "policy": policy}
    )
    await runs.start_run(client, ts_settings, request, rid)
    await waiting_approval(client, rid)
    await time_env.sleep(timedelta(minutes=90))

    async def escalated():
        summary = await runs.get_summary(client, rid)
        return summary.pending_approvals and summary.pending_approvals[0].escalated

    await eventually(escalated)


async def test_an_escalated_approval_is_decided_by_the_escalation_approvers(time_env, ts_settings):
    client, rid = time_env.client, run_id("escalate")
    await escalated_run(time_env, ts_settings, rid)
    await runs.approve(client, rid, Decision(by="alice"))  # no longer alice's call: ignored
    await signals_applied(client, rid)
    state = await runs.get_state(client, rid)
    assert state.approvals[0].status is ApprovalStatus.PENDING
    await runs.approve(client, rid, Decision(by="boss"))
    await runs.wait_result(client, rid)
    assert (await runs.get_state(client, rid)).approvals[0].decided_by == "boss"
    assert count_effects(ts_settings, rid, "charge") == 1


async def test_after_escalation_the_second_timeout_rejects(time_env, ts_settings):
    client, rid = time_env.client, run_id("escalate-twice")
    await escalated_run(time_env, ts_settings, rid)
    await time_env.sleep(timedelta(minutes=90))  # the second: nobody decided, rejected
    result = await runs.wait_result(client, rid)
    [approval] = (await runs.get_state(client, rid)).approvals
    assert approval.status is ApprovalStatus.REJECTED and approval.escalated
    assert approval.decided_by == "deadline"
    assert count_effects(ts_settings, rid, "charge") == 0
    assert "not paid" in (result.final_answer or "")


async def test_a_question_past_its_deadline_expires_and_the_model_decides(time_env, ts_settings):
    client, rid = time_env.client, run_id("expire")
    request = RunRequest.model_validate(
        {"goal": "ask", "scenario": "ask-human", "policy": {"decision_timeout_seconds": 600}}
    )
    await runs.start_run(client, ts_settings, request, rid)

    async def asked():
        return (await runs.get_summary(client, rid)).pending_questions

    await eventually(asked)
    await time_env.sleep(timedelta(hours=1))
    await runs.wait_result(client, rid)
    state = await runs.get_state(client, rid)
    assert state.questions[0].status is QuestionStatus.EXPIRED
    assert state.plan[0].result == "No answer; defaulting to INV-1001."


async def test_every_tool_call_needs_approval_once_spend_passes_the_budget(time_env, ts_settings):
    priced = ts_settings.model_copy(
        update={"price_input_per_mtok": 1_000_000.0, "task_queue": "priced"}  # $1 a token
    )
    client, rid = time_env.client, run_id("budget")
    request = RunRequest.model_validate(
        {
            "goal": "pay",
            "scenario": "pay-invoice",
            "policy": {"approve_everything_after_spend_usd": 5.0},
        }
    )
    async with build_worker(client, priced):
        await runs.start_run(client, priced, request, rid)
        summary = await waiting_approval(client, rid)
        first = summary.pending_approvals[0]
        assert first.tool == "lookup_invoice"  # read-only, yet gated: the budget is spent
        assert "over its $5.0000 budget" in first.rule
        gated = set()
        while not (summary := await runs.get_summary(client, rid)).status.is_closed:
            for pending in summary.pending_approvals:
                gated.add(pending.tool)
                await runs.reject(client, rid, Decision(request_id=pending.request_id, by="al"))
        # send_email never comes: with the payment rejected, the model skips it.
        assert gated == {"lookup_invoice", "draft_email", "pay_invoice"}
        assert count_effects(priced, rid, "charge") == 0
