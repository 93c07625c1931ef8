"""Each record's rules, alone: its share of a fork, of a conversation's trim, and the
transitions the workflow reaches only end to end (a wait left, a turn counted, a message
taken once, keys revoked, an effect counted)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

from durable_agents.workflows.activity_io import TokenUsage
from durable_agents.workflows.contracts import (
    EFFECTS_LISTED,
    EffectSummary,
    RunPolicy,
    RunRequest,
    Spend,
    TrustedKey,
)
from durable_agents.workflows.conversation_records import QueuedMessage, TurnRecord
from durable_agents.workflows.people_inputs import (
    Actor,
    Answer,
    BudgetRaise,
    DecideRequest,
    KeyRevocation,
    StatePatch,
)
from durable_agents.workflows.records import (
    ApprovalRequest,
    ApprovalStatus,
    Delegation,
    ForkOrigin,
    Question,
    QuestionStatus,
    RequestKind,
    RunStatus,
    SignedUse,
    StepStatus,
)
from durable_agents.workflows.run_summary import for_readers, waiting_for
from durable_agents.workflows.state import (
    RunState,
    apply_patch,
    cancel,
    forked,
    trim_for_a_long_life,
)
from durable_agents.workflows.state.fields import StateFields as Fields
from durable_agents.workflows.state.record import StateWriteRefused
from durable_agents.workflows.state.run_state import RECORDS
from tests.conftest import arrange

NOW = datetime(2026, 1, 1, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)
KEY = TrustedKey(public_key=base64.b64encode(bytes(32)).decode())


def new_state(**request: object) -> RunState:
    return RunState.start("parent", RunRequest.model_validate({"goal": "g", **request}), NOW)


def approval(
    request_id: str, step: int, status: ApprovalStatus = ApprovalStatus.PENDING
) -> ApprovalRequest:
    return ApprovalRequest(
        request_id=request_id, tool="pay", arguments={}, reason="", step=step,
        requested_at=NOW, status=status,
    )  # fmt: skip


def question(
    question_id: str, step: int, status: QuestionStatus = QuestionStatus.PENDING
) -> Question:
    return Question(question_id=question_id, question="?", step=step, asked_at=NOW, status=status)


def delegation(child_id: str, status: str = "running", **more: object) -> Delegation:
    return Delegation(
        child_id=child_id, agent="a", tool="ask_a", step=1, tool_call_id="t", task=child_id,
        status=status, **more,
    )  # fmt: skip


def effect(n: int) -> EffectSummary:
    return EffectSummary(tool="pay", idempotency_key=f"k{n}", ok=True)


def a_run_at_step_two() -> RunState:
    """Step 1 done, step 2 running, with something of every record's to fork."""
    state = new_state()
    state.steps.set_plan(["one", "two", "three"], NOW)
    one, two = state.plan[0], state.plan[1]
    state.steps.start_step(one, NOW)
    state.outcomes.record(1, "c1", "pay", ok=True, summary="paid", seq=3, now=NOW)
    state.outcomes.record_effect(effect(1))
    state.steps.complete_step(one, "did one", NOW)
    state.transcript.begin_phase()
    state.steps.start_step(two, NOW)
    state.steps.count_turn(two)
    state.transcript.queue_message("user", "step two")
    state.outcomes.record(2, "c2", "pay", ok=True, summary="paid", seq=9, now=NOW)
    state.requests.request_approval(approval("done-1", 1, ApprovalStatus.APPROVED))
    state.requests.request_approval(approval("wait-2", 2))
    state.requests.ask(question("asked-1", 1, QuestionStatus.ANSWERED))
    state.requests.ask(question("asked-2", 2))
    state.budget_book.start_delegation(delegation("done", "completed"), NOW)
    state.budget_book.start_delegation(delegation("going"), NOW)
    state.moments.reach("tool", "pay", NOW, 3)
    state.signatures.remember_nonces([SignedUse(nonce="n1", at=NOW)])
    state.lifecycle.request_pause(Actor(by="ops"), NOW)
    state.lifecycle.request_cancel(Actor(by="ops"), NOW)
    state.transcript.note_for_model("ops edited the run")
    arrange(state, errors=["a tool failed"], transcript_rows=12)
    state.transcript.held_at("tq@0123456789ab")
    return state


def test_a_fork_keeps_what_came_before_its_moment_and_starts_the_rest_over():
    parent = a_run_at_step_two()
    before = parent.model_dump_json()
    phase_start = parent.phase_start_seq
    fork = forked(parent, "fork-1", "parent", LATER)
    assert parent.model_dump_json() == before  # the parent is not touched
    # Origin: a run of its own, from its parent's moment, begun now.
    assert (fork.run_id, fork.identity, fork.delegated_by) == ("fork-1", None, None)
    assert fork.parent == ForkOrigin(run_id="parent", moment=parent.moment)
    assert fork.created_at == LATER and parent.created_at == NOW
    # Transcript: the phase in progress is written again from where it began.
    assert fork.next_seq == phase_start < parent.next_seq
    assert (fork.transcript_rows, fork.outbox, fork.notes_for_model) == (None, [], [])
    # Its parent's past is copied in the parent's store: the fork goes where that is.
    assert fork.store_queue == parent.store_queue == "tq@0123456789ab"
    # Steps: the running one starts over, the done one stays done.
    one, two, three = fork.plan
    assert one.status is StepStatus.DONE and one.result == "did one"
    assert (two.status, two.turns, two.started_at) == (StepStatus.PENDING, 0, None)
    assert three.status is StepStatus.PENDING and fork.current_step is None
    assert fork.context == parent.context
    # Outcomes: the restarting step's results are made again; the effects were the parent's.
    assert [r.step for r in fork.results] == [1] and fork.results_total == parent.results_total
    assert (fork.effects.total, fork.effects.recent) == (0, [])
    # Requests: decided before the moment stay; the restarting step's are asked again.
    assert [a.request_id for a in fork.approvals] == ["done-1"]
    assert [q.question_id for q in fork.questions] == ["asked-1"]
    # Budget book: a finished sub-agent's answer is reused; a running one was the parent's.
    assert [(d.child_id, d.inherited) for d in fork.delegations] == [("done", True)]
    assert fork.tool_calls == parent.tool_calls and fork.usage == parent.usage
    # Signatures, moments, lifecycle.
    assert fork.signed_nonces == [] and fork.events == [] and fork.moment == parent.moment
    assert (fork.errors, fork.final_answer) == ([], None)
    assert (fork.pause_requested, fork.cancel_requested_by) == (False, None)
    assert fork.status is RunStatus.RUNNING
    assert fork.audit[-1].action == "forked" and fork.audit[-1].detail == (
        f"from parent at moment {parent.moment}"
    )


def test_a_fork_before_a_plan_plans():
    state = new_state()
    assert forked(state, "fork-1", "parent", LATER).status is RunStatus.PLANNING


def test_leaving_a_wait_waits_on_for_what_is_still_asked():
    state = new_state()
    state.requests.request_approval(approval("a1", 0))
    state.requests.ask(question("q1", 0))
    assert state.status is RunStatus.AWAITING_INPUT
    state.requests.apply_decision(DecideRequest(approve=True, request_id="a1", by="cfo"), NOW)
    assert state.status is RunStatus.AWAITING_INPUT  # the question still waits
    state.requests.answer(Answer(question_id="q1", answer="yes", by="cfo"), NOW)
    assert state.status is RunStatus.PLANNING  # no plan yet
    state.steps.set_plan(["one"], NOW)
    state.requests.request_approval(approval("a2", 1))
    state.requests.ask(question("q2", 1))
    state.requests.expire(state.questions[-1], NOW)
    assert state.status is RunStatus.AWAITING_APPROVAL
    state.requests.apply_decision(DecideRequest(approve=False, request_id="a2", by="cfo"), NOW)
    assert state.status is RunStatus.RUNNING


def test_a_pause_and_a_resume_return_to_what_the_run_waited_for():
    state = new_state()
    state.steps.set_plan(["one"], NOW)
    state.requests.request_approval(approval("a1", 1))
    state.lifecycle.request_pause(Actor(by="ops"), NOW)
    state.lifecycle.enter_pause()
    assert state.status is RunStatus.PAUSED and waiting_for(state) == "resume"
    state.lifecycle.resume(Actor(by="ops"), NOW)
    assert state.status is RunStatus.AWAITING_APPROVAL and not state.pause_requested


def test_a_cancel_closes_every_request_still_waiting():
    state = new_state()
    state.requests.request_approval(approval("a1", 0))
    state.requests.ask(question("q1", 0))
    state.lifecycle.request_cancel(Actor(by="ops", reason="wrong customer"), NOW)
    cancel(state, NOW)
    assert state.status is RunStatus.CANCELLED
    assert [(a.status, a.decided_by) for a in state.approvals] == [
        (ApprovalStatus.REJECTED, "cancelled")
    ]
    assert [q.status for q in state.questions] == [QuestionStatus.EXPIRED]
    assert state.audit[-1].actor == "ops" and state.audit[-1].action == "run_cancelled"


def test_a_raise_approves_the_budget_request_and_the_run_goes_on():
    state = new_state(budget={"usd": 1.0})
    state.steps.set_plan(["one"], NOW)
    budget_request = approval("budget-1", 1).model_copy(update={"kind": RequestKind.BUDGET})
    state.requests.request_approval(budget_request)
    assert state.status is RunStatus.AWAITING_APPROVAL
    raised = state.budget_book.raise_budget(BudgetRaise(usd=2.0, by="cfo"), NOW)
    assert raised.usd == 2.0 and state.budget is not None and state.budget.usd == 2.0
    assert state.approvals[0].status is ApprovalStatus.APPROVED
    assert state.status is RunStatus.RUNNING


def test_a_long_lifes_trim_keeps_what_still_waits_and_the_latest_of_the_rest():
    state = new_state(conversation=True)
    for i in range(5):
        state.requests.request_approval(approval(f"a{i}", i, ApprovalStatus.APPROVED))
        state.requests.ask(question(f"q{i}", i, QuestionStatus.ANSWERED))
        state.budget_book.start_delegation(delegation(f"d{i}", "completed"), NOW)
    state.requests.request_approval(approval("waiting", 9))
    state.requests.ask(question("asked", 9))
    state.budget_book.start_delegation(delegation("running"), NOW)
    for i in range(5):  # closed after the open ones: the open ones are the oldest
        state.requests.request_approval(approval(f"b{i}", i, ApprovalStatus.REJECTED))
        state.requests.ask(question(f"r{i}", i, QuestionStatus.EXPIRED))
        state.budget_book.start_delegation(delegation(f"e{i}", "failed"), NOW)
    arrange(state, errors=[f"e{i}" for i in range(5)])
    trim_for_a_long_life(state, kept=2)
    assert [a.request_id for a in state.approvals] == ["waiting", "b3", "b4"]
    assert [q.question_id for q in state.questions] == ["asked", "r3", "r4"]
    assert [d.child_id for d in state.delegations] == ["running", "e3", "e4"]
    assert state.errors == ["e3", "e4"] and len(state.audit) == 2


def test_a_step_counts_its_model_turns():
    state = new_state()
    state.steps.set_plan(["one"], NOW)
    step = state.plan[0]
    assert [state.steps.count_turn(step) for _ in range(3)] == [1, 2, 3] and step.turns == 3


def test_a_conversation_takes_a_message_once_and_counts_each_turn():
    state = new_state(conversation=True)
    thread = state.thread

    def message(i: int) -> QueuedMessage:
        return QueuedMessage(message_id=f"m{i}", text="hi", by="jo", received_at=NOW)

    assert thread.take_message(message(1), remembered=3)
    assert not thread.take_message(message(1), remembered=3)  # the same id again
    for i in range(2, 6):
        assert thread.take_message(message(i), remembered=3)
    convo = thread.conversation_fields
    assert convo.seen_ids == ["m3", "m4", "m5"]  # the latest ids are remembered
    assert [m.message_id for m in convo.queue] == ["m1", "m2", "m3", "m4", "m5"]
    for i in (1, 2, 3):
        thread.finish_turn(
            TurnRecord(turn=i, message_id=f"m{i}", by="jo", message="hi", started_at=NOW), kept=2
        )
    assert [m.message_id for m in convo.queue] == ["m4", "m5"]
    assert [t.message_id for t in convo.turns] == ["m2", "m3"]
    assert (convo.turns_total, convo.turns_this_run) == (3, 3)
    thread.new_run()
    assert (convo.turns_total, convo.turns_this_run) == (3, 0)
    thread.close(Actor(by="jo", reason="done"), NOW)
    assert (convo.closed, convo.closed_by) == (True, "jo")


def test_an_effect_counts_past_the_ones_listed():
    state = new_state()
    for i in range(EFFECTS_LISTED + 3):
        state.outcomes.record_effect(effect(i))
    assert state.effects.total == EFFECTS_LISTED + 3
    assert len(state.effects.recent) == EFFECTS_LISTED
    assert state.effects.recent[-1].idempotency_key == f"k{EFFECTS_LISTED + 2}"


def test_a_memoized_call_is_counted_but_is_not_the_next_calls_estimate():
    state = new_state()
    paid = TokenUsage(input_tokens=100, output_tokens=20, cost_usd=0.01)
    state.budget_book.record_usage(paid, memoized=False)
    state.budget_book.record_usage(TokenUsage(input_tokens=1, output_tokens=1), memoized=True)
    assert state.last_call == Spend(usd=0.01, tokens=120)
    assert (state.usage.model_calls, state.usage.memoized_calls) == (2, 1)


def test_keys_revoked_are_kept_once_each_and_only_keys_the_run_trusts():
    state = new_state(policy=RunPolicy(trusted_keys={"k1": KEY, "k2": KEY}))
    state.signatures.take_revoked(["k1", "x"])
    state.signatures.take_revoked(["x", "k1", "y"])
    assert state.revoked_keys == ["k1", "x", "y"]
    assert state.signatures.revoke(KeyRevocation(key_ids=["made-up", "k2", "k1"], by="sec"), NOW)
    assert state.revoked_keys == ["k1", "x", "y", "k2"]
    assert not state.signatures.revoke(KeyRevocation(key_ids=["k2", "other"], by="sec"), NOW)


def test_a_memory_namespace_alone_keeps_the_subject_and_a_forks_is_its_parents_whole():
    state = new_state(subject={"customer": "jane"})
    state.terms.take_memory("ns-1")
    assert (state.memory_namespace, state.subject) == ("ns-1", {"customer": "jane"})
    # A fork takes its parent's policy and memory, the subject included: none if it has none.
    state.terms.take_parents(RunPolicy(), None, None)
    assert (state.memory_namespace, state.subject, state.policy) == (None, None, RunPolicy())
    state.terms.take_parents(RunPolicy(), "ns-2", {"customer": "joe"})
    assert (state.memory_namespace, state.subject) == ("ns-2", {"customer": "joe"})


def test_an_edit_that_leaves_no_steps_to_do_drops_them():
    state = new_state()
    state.steps.set_plan(["one", "two"], NOW)
    state.steps.start_step(state.plan[0], NOW)
    changed = apply_patch(state, StatePatch(by="ops", pending_steps=[]), NOW)
    assert [s.title for s in state.plan] == ["one"]
    assert changed == ["the remaining steps are now: (none)"]
    assert state.notes_for_model == ["ops edited the run: the remaining steps are now: (none)."]


def test_what_a_query_hands_out_has_no_spend_report_token():
    state = new_state()
    state.budget_book.start_delegation(delegation("c1", report_token="secret"), NOW)
    shown = for_readers(state)
    assert [d.report_token for d in shown.delegations] == [None]
    assert state.delegations[0].report_token == "secret"  # the run keeps its own


def test_a_spend_read_clears_the_report_it_answers():
    state = new_state()
    state.budget_book.start_delegation(delegation("c1", spend_read=True), NOW)
    assert state.budget_book.child_spent("c1", Spend(usd=9.0))
    found = state.delegations[0]
    assert found.spend_reported and found.spent == Spend()  # a report is only a nudge
    state.budget_book.reading_spend(found)
    assert not found.spend_reported


def test_every_record_is_refused_every_field_it_does_not_own():
    state = new_state()
    views = [
        getattr(state, name)
        for name in vars(RunState)
        if type(getattr(state, name, None)) in RECORDS
    ]
    assert len(views) == len(RECORDS)
    for view in views:
        for field in set(Fields.model_fields) - view.OWNS:
            try:
                view._set(**{field: getattr(state, field)})
            except StateWriteRefused:
                continue
            raise AssertionError(f"{type(view).__name__} wrote {field}")
