"""The state model's transitions and the approval policy, without a server."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from pydantic import ValidationError

from durable_agents.examples.invoice import PayInvoiceArgs
from durable_agents.workflows.agent_records import ToolRecord
from durable_agents.workflows.contracts import DelegatedBy, RunPolicy, RunRequest
from durable_agents.workflows.packing import pack_state
from durable_agents.workflows.people_inputs import DecideRequest, StatePatch
from durable_agents.workflows.policy import approval_rule, idempotency_key
from durable_agents.workflows.records import (
    ApprovalRequest,
    ApprovalStatus,
    Delegation,
    RunStatus,
    StepStatus,
)
from durable_agents.workflows.run_summary import progress_line
from durable_agents.workflows.state import RunState, apply_patch, forked, patch_error, unpack_state
from durable_agents.workflows.timeline import WrittenItems, state_json
from tests.conftest import EXAMPLE_AGENTS, arrange

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def new_state() -> RunState:
    return RunState.start("r1", RunRequest(goal="g"), NOW)


def test_plan_steps_and_completion():
    state = new_state()
    assert state.status is RunStatus.PLANNING
    state.steps.set_plan(["a", "b"], NOW)
    step = state.steps.next_step()
    assert step is not None and step.index == 1
    state.steps.start_step(step, NOW)
    assert progress_line(state) == "step 1/2: a — running"
    state.steps.complete_step(step, "did a", NOW)
    assert [s.status for s in state.plan] == [StepStatus.DONE, StepStatus.PENDING]
    assert state.steps.next_step().index == 2  # type: ignore[union-attr]
    state.lifecycle.complete("answer", NOW)
    assert state.status is RunStatus.COMPLETED


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # the list title, on purpose
def test_a_moments_state_written_from_items_already_written_reads_back_the_same():
    state, written = new_state(), WrittenItems()
    state.steps.set_plan([f"item {i}" for i in range(5)], NOW)
    for step in state.plan[:3]:  # steps done, one running, some not begun
        state.steps.start_step(step, NOW)
        state.moments.reach("model", step.title, NOW, None)
        before = state_json(state, written)
        assert RunState.model_validate_json(before) == state
        state.steps.complete_step(step, f"did {step.title}", NOW)
        state.moments.reach("tool", step.title, NOW, None)
        after = state_json(state, written)
        assert RunState.model_validate_json(after) == state and after != before
        assert json.loads(after) == json.loads(state.model_dump_json())
    assert len(written.held) == 5 + 6  # each step and each event, written once or more
    untouched = written.texts[id(state.plan[4])]
    state.plan[1].__dict__["result"] = "changed behind its back"  # no setattr: still seen
    assert RunState.model_validate_json(state_json(state, written)) == state
    assert written.texts[id(state.plan[4])] is untouched  # not written again
    state.plan.append(state.plan[4])  # one item twice: written for both places
    assert RunState.model_validate_json(state_json(state, written)) == state
    state.plan[4].title = "renamed"
    assert RunState.model_validate_json(state_json(state, written)).plan[5].title == "renamed"
    state.plan[0].__dict__["title"] = ["not", "a", "key"]  # a mutable value: the whole state
    assert state_json(state, written) == state.model_dump_json()


def test_sequence_numbers_are_never_reused():
    state = new_state()
    state.transcript.queue_message("user", "hello")
    seqs = [state.outbox[0].seq, state.transcript.take_seq(), state.transcript.take_seq()]
    assert seqs == [0, 1, 2]
    assert [m.seq for m in state.transcript.drain_outbox()] == [0] and state.outbox == []


def test_a_decision_applies_to_the_named_or_only_pending_request():
    state = new_state()
    state.steps.set_plan(["a"], NOW)
    for rid in ("c1", "c2"):
        state.requests.request_approval(
            ApprovalRequest(
                request_id=rid,
                tool="pay_invoice",
                arguments={},
                reason="",
                step=1,
                requested_at=NOW,
            )
        )
    assert "several approvals are pending" in (
        state.requests.decision_error(DecideRequest(approve=True, by="a")) or ""
    )
    assert (
        state.requests.decision_error(DecideRequest(approve=True, request_id="nope", by="a"))
        == "no approval request 'nope'"
    )
    decided = state.requests.apply_decision(
        DecideRequest(approve=False, request_id="c2", by="a", comment="ok"), NOW
    )
    assert decided.status is ApprovalStatus.REJECTED
    assert state.status is RunStatus.AWAITING_APPROVAL  # c1 still waits
    assert state.requests.decision_error(DecideRequest(approve=True, request_id="c2", by="b")) == (
        "request c2 was already rejected by a"
    )
    state.requests.apply_decision(DecideRequest(approve=True, by="a"), NOW)
    assert state.status is RunStatus.RUNNING
    assert (
        state.requests.decision_error(DecideRequest(approve=True, by="a"))
        == "no approval is pending"
    )


def test_only_named_approvers_may_decide_and_escalation_hands_over():
    policy = RunPolicy(approvers={"pay_invoice": ["cfo"]}, escalate_to=["ceo"])
    assert policy.may_decide("pay_invoice", "cfo") and not policy.may_decide(
        "pay_invoice", "intern"
    )
    assert policy.may_decide("send_email", "intern")  # tools not listed: anyone
    assert policy.may_decide("pay_invoice", "ceo", escalated=True)
    assert not policy.may_decide("pay_invoice", "cfo", escalated=True)


def test_a_tools_declared_approvers_hold_unless_the_policy_names_its_own():
    policy = RunPolicy(approvers={"pay_invoice": ["cfo"]})
    policy.take_tool_approvers({"pay_invoice": ["finance"], "issue_refund": ["finance"]})
    assert policy.may_decide("pay_invoice", "cfo") and not policy.may_decide(
        "pay_invoice", "finance"
    )
    assert policy.may_decide("issue_refund", "finance")
    assert not policy.may_decide("issue_refund", "cfo")


def args_for(tool, **values):
    return EXAMPLE_AGENTS.tools[tool].args_model.model_validate(values)


def test_approval_comes_from_declared_risk_and_policy_only():
    pay = args_for("pay_invoice", invoice_id="INV-1001", amount="5")
    send = args_for("send_email", to="a@b.co", subject="s", body="b")
    look = args_for("lookup_invoice", invoice_id="INV-1001")
    refund = args_for("issue_refund", customer_email="a@b.co", amount="50", reason="r")

    def rule(tool, args, policy=None, spent=0.0):
        spec = ToolRecord.of(EXAMPLE_AGENTS.tools[tool])
        return approval_rule(spec, args, policy or RunPolicy(), spent)

    assert rule("pay_invoice", pay) == "pay_invoice is declared as needing approval"
    assert rule("send_email", send) is None and rule("lookup_invoice", look) is None
    assert rule("send_email", send, RunPolicy(approve_all_side_effects=True))
    assert rule("issue_refund", refund) is None
    assert rule("issue_refund", refund, RunPolicy(approve_payments_above=Decimal("50"))) is None
    assert "above the run's approval threshold 49.99" in (
        rule("issue_refund", refund, RunPolicy(approve_payments_above=Decimal("49.99"))) or ""
    )
    budget = RunPolicy(approve_everything_after_spend_usd=0.01)
    assert rule("lookup_invoice", look, budget, spent=0.005) is None
    assert "over its $0.0100 budget" in (rule("lookup_invoice", look, budget, spent=0.02) or "")


def test_patch_changes_pending_steps_only_and_tells_the_model():
    state = new_state()
    state.steps.set_plan(["a", "b", "c"], NOW)
    first = state.steps.next_step()
    assert first is not None
    state.steps.start_step(first, NOW)
    patch = StatePatch(by="ed", pending_steps=["x"], goal="new goal")
    assert patch_error(state, patch) is None
    apply_patch(state, patch, NOW)
    assert [(s.index, s.title, s.status) for s in state.plan] == [
        (1, "a", StepStatus.RUNNING),
        (2, "x", StepStatus.PENDING),
    ]
    assert state.goal == "new goal"
    assert state.notes_for_model == [
        "ed edited the run: the goal is now: new goal; the remaining steps are now: x."
    ]
    assert state.audit[-1].actor == "ed" and state.audit[-1].action == "edited"
    assert patch_error(state, StatePatch(by="ed")) is not None  # changes nothing


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


def test_the_state_carried_over_continue_as_new_is_packed_and_unpacks_whole():
    """A long plan is carried twice per continue-as-new (the event and the next start):
    packed, a 2,000-step plan costs a fraction of its JSON."""
    state = new_state()
    state.steps.set_plan(
        [f"Reconcile ledger account {i} against the bank feed" for i in range(2000)], NOW
    )
    for step in state.plan[:300]:
        state.steps.start_step(step, NOW)
        state.steps.complete_step(step, f"account {step.index} reconciled, no difference", NOW)
    packed = pack_state(state)
    assert unpack_state(packed) == state
    assert len(packed) * 4 < len(state.model_dump_json())


def test_a_fork_of_a_sub_agents_run_is_nobodys_child_and_keeps_finished_delegations():
    origin = DelegatedBy(run_id="parent", step=1, tool_call_id="c1", agent="triage")
    child = RunState.start("parent.1.c1.abc", RunRequest(goal="g", delegated_by=origin), NOW)
    arrange(child, delegations=[
        Delegation(child_id="x", agent="a", tool="ask_a", step=1, tool_call_id="t", task="done",
                   status="completed", answer="42"),
        Delegation(child_id="y", agent="a", tool="ask_a", step=1, tool_call_id="u", task="going"),
    ])  # fmt: skip
    fork = forked(child, "fork-1", "parent.1.c1.abc", NOW)
    assert child.delegated_by == origin and fork.delegated_by is None
    assert [(d.child_id, d.inherited) for d in fork.delegations] == [("x", True)]
    assert fork.budget_book.reusable_delegation("a", 1, "done") is not None
    assert fork.budget_book.reusable_delegation("a", 1, "another task") is None


def test_a_spent_budget_is_raised_or_rejected_never_approved():
    state = new_state()
    state.steps.set_plan(["a"], NOW)
    asked = ApprovalRequest.for_budget(
        "budget-1", "model", "$0.50 spent", {"spent_usd": 0.5}, 1, NOW, NOW
    )
    state.requests.request_approval(asked)
    approve = DecideRequest(approve=True, request_id="budget-1", by="a")
    assert state.requests.decision_error(approve) == (
        "a spent budget is not approved but raised (raise_budget), or rejected to stop"
    )
    reject = DecideRequest(approve=False, request_id="budget-1", by="a")
    assert state.requests.decision_error(reject) is None
    assert state.requests.apply_decision(reject, NOW).status is ApprovalStatus.REJECTED
