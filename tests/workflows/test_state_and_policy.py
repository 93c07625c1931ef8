"""The state model's transitions and the approval policy, without a server."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from workflows.catalog import TOOLS, PayInvoiceArgs
from workflows.contracts import Decision, RunPolicy, RunRequest
from workflows.policy import idempotency_key, needs_approval
from workflows.state import ApprovalRequest, ApprovalStatus, RunState, RunStatus, StepStatus

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def new_state() -> RunState:
    return RunState.start("r1", RunRequest(goal="g"), NOW)


def test_plan_steps_and_completion():
    state = new_state()
    assert state.status is RunStatus.PLANNING
    state.set_plan(["a", "b"], NOW)
    step = state.next_step()
    assert step is not None and step.index == 1
    state.start_step(step, NOW)
    assert state.progress_line() == "step 1/2: a — running"
    state.complete_step(step, "did a", NOW)
    assert [s.status for s in state.plan] == [StepStatus.DONE, StepStatus.PENDING]
    assert state.next_step().index == 2  # type: ignore[union-attr]
    state.complete("answer", NOW)
    assert state.status is RunStatus.COMPLETED


def test_sequence_numbers_are_never_reused():
    state = new_state()
    state.queue_message("user", "hello")
    seqs = [state.outbox[0].seq, state.take_seq(), state.take_seq()]
    assert seqs == [0, 1, 2]
    assert [m.seq for m in state.drain_outbox()] == [0] and state.outbox == []


def test_a_decision_applies_to_the_named_or_only_pending_request():
    state = new_state()
    for rid in ("c1", "c2"):
        state.request_approval(
            ApprovalRequest(
                request_id=rid,
                tool="pay_invoice",
                arguments={},
                reason="",
                step=1,
                requested_at=NOW,
            )
        )
    assert state.decide(Decision(by="a"), True, NOW) is None  # ambiguous: two pending
    assert state.decide(Decision(request_id="nope", by="a"), True, NOW) is None
    decided = state.decide(Decision(request_id="c2", by="a", comment="ok"), False, NOW)
    assert decided is not None and decided.status is ApprovalStatus.REJECTED
    assert state.status is RunStatus.AWAITING_APPROVAL  # c1 still waits
    assert state.decide(Decision(request_id="c2", by="b"), True, NOW) is None  # already decided
    state.decide(Decision(by="a"), True, NOW)
    assert state.status is RunStatus.RUNNING


def test_approval_comes_from_declared_risk_and_policy_only():
    pay, send, lookup = TOOLS["pay_invoice"], TOOLS["send_email"], TOOLS["lookup_invoice"]
    strict = RunPolicy(approve_all_side_effects=True)
    assert needs_approval(pay, RunPolicy()) and needs_approval(pay, strict)
    assert not needs_approval(send, RunPolicy()) and needs_approval(send, strict)
    assert not needs_approval(lookup, strict)


def test_idempotency_key_is_made_of_durable_identifiers():
    assert idempotency_key("run-1", 3, "call_x") == "run-1/step-3/call_x"


@pytest.mark.parametrize(
    "args",
    [
        {"invoice_id": "INV-1001", "amount": "-5"},
        {"invoice_id": "1001", "amount": "5"},
        {"invoice_id": "INV-1001", "amount": "5", "currency": "euro"},
        {"invoice_id": "INV-1001", "amount": "5", "approved": True},
    ],
)
def test_model_arguments_are_validated(args):
    with pytest.raises(ValidationError):
        PayInvoiceArgs.model_validate(args)


@pytest.mark.parametrize(
    "payload",
    [{"goal": ""}, {"goal": "x", "limits": {"max_turns_per_step": 0}}, {"goal": "x", "extra": 1}],
)
def test_bad_start_requests_are_refused(payload):
    with pytest.raises(ValidationError):
        RunRequest.model_validate(payload)
