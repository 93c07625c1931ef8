"""What one signature approves, checked on the state alone (workflows/signed_changes.py):
a decision binds its request, tool, step and comment and must be newer than the request;
an answer binds its question and text; a decision naming no request is refused when the
waiting request's id was used before, and a named one never skips the already-decided
check. Unsigned and forged answers do not count."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from durable_agents.control.signer import Signer
from durable_agents.workflows import signed_changes
from durable_agents.workflows.contracts import RunPolicy, TrustedKey
from durable_agents.workflows.people_inputs import Answer, BudgetRaise, DecideRequest, Decision
from durable_agents.workflows.records import (
    ApprovalRequest,
    ApprovalStatus,
    Question,
    RunEvent,
    RunStatus,
)
from durable_agents.workflows.signing import digest_of, new_key, sign
from durable_agents.workflows.state import RunState
from tests.conftest import arrange


def times() -> tuple[datetime, datetime]:
    """A request made a minute ago, and the workflow's time now: the signer signs with
    the wall clock's time, read when each test runs (not when the file was collected)."""
    now = datetime.now(UTC)
    return now - timedelta(minutes=1), now + timedelta(seconds=1)


def signed_run(at: datetime) -> tuple[RunState, Signer]:
    key, public = new_key()
    policy = RunPolicy(
        require_signed_decisions=True, trusted_keys={"k": TrustedKey(public_key=public)}
    )
    state = RunState(run_id="r", identity="r@1", goal="g", policy=policy,
                     created_at=at, updated_at=at, signature_version=2)  # fmt: skip
    return state, Signer(key, "k")


def refused(error: str | None) -> str:
    assert error is not None, "it counted"
    return error


def request(
    at: datetime, request_id: str = "call-1", tool: str = "pay", step: int = 1, **kw
) -> ApprovalRequest:
    return ApprovalRequest(request_id=request_id, tool=tool, arguments={"amount": "10"},
                           reason="", step=step, requested_at=at, **kw)  # fmt: skip


def test_a_decision_binds_its_tool_step_comment_and_time():
    NOW, LATER = times()
    state, signer = signed_run(NOW)
    pending = request(NOW)
    state.requests.request_approval(pending)
    good = signer.approval(state.store_key, "cfo", True, pending, "ok")
    decided = DecideRequest(approve=True, request_id="call-1", by="cfo", comment="ok", signed=good)
    assert signed_changes.decision_error(state, decided, LATER) is None
    # The same signature with other words for the model: the comment is covered.
    other_words = DecideRequest(
        approve=True, request_id="call-1", by="cfo", comment="pay mallory", signed=good
    )
    assert "digest differs" in refused(signed_changes.decision_error(state, other_words, LATER))
    # Signed for the same id on another tool or step.
    for lookalike in (request(NOW, tool="refund"), request(NOW, step=2)):
        signed = signer.approval(state.store_key, "cfo", True, lookalike, "ok")
        decision = DecideRequest(
            approve=True, request_id="call-1", by="cfo", comment="ok", signed=signed
        )
        assert "digest differs" in refused(signed_changes.decision_error(state, decision, LATER))
    # Signed before the request existed (an old signature for an id the model reused).
    early = good.model_copy(update={"at": (NOW - timedelta(hours=1)).isoformat()})
    decision = DecideRequest(
        approve=True, request_id="call-1", by="cfo", comment="ok", signed=early
    )
    assert "older than the request" in refused(
        signed_changes.decision_error(state, decision, LATER)
    )


def test_a_signed_decision_sent_as_a_signal_counts_as_signed():
    """`approve` and `reject` signals carry a `Decision`; the verdict their name gives it
    joins it with its signature intact, so the signed approval counts and its signature
    still binds the verdict (a reject signal cannot carry an approval's signature)."""
    NOW, LATER = times()
    state, signer = signed_run(NOW)
    pending = request(NOW)
    state.requests.request_approval(pending)
    good = signer.approval(state.store_key, "cfo", True, pending, "ok")
    sent = Decision(request_id="call-1", by="cfo", comment="ok", signed=good)
    approved = DecideRequest.with_verdict(sent, approve=True)
    assert approved.signed == good
    assert signed_changes.decision_error(state, approved, LATER) is None
    flipped = DecideRequest.with_verdict(sent, approve=False)
    assert refused(signed_changes.decision_error(state, flipped, LATER))


def test_a_decision_ends_with_its_requests_deadline():
    """A signature kept back (or a request left waiting past its deadline, while the run
    was paused) counts until the deadline and the clock skew, not forever."""
    NOW, LATER = times()
    deadline = LATER + timedelta(minutes=10)
    state, signer = signed_run(NOW)
    arrange(state, people_checks=2)  # this release's rules (patch people-inputs-checked)
    pending = request(NOW, deadline=deadline)
    state.requests.request_approval(pending)
    signed = signer.approval(state.store_key, "cfo", True, pending, "ok")
    decision = DecideRequest(
        approve=True, request_id="call-1", by="cfo", comment="ok", signed=signed
    )
    question = Question(question_id="q-1", question="Which?", step=1, asked_at=NOW,
                        deadline=deadline)  # fmt: skip
    state.requests.ask(question)
    answer = Answer(question_id="q-1", answer="INV-1", by="dan",
                    signed=signer.answer(state.store_key, "dan", question, "INV-1"))  # fmt: skip
    for now, counts in (
        (deadline, True),
        (deadline + timedelta(minutes=4), True),  # within the clock skew
        (deadline + timedelta(minutes=6), False),
    ):
        for error in (
            signed_changes.decision_error(state, decision, now),
            signed_changes.answer_error(state, answer, now),
        ):
            assert (error is None) == counts, (now, error)
            assert counts or "deadline" in refused(error)
    # A run recorded before the rule replays as it ran: the late decision counted then.
    arrange(state, people_checks=1)
    late = deadline + timedelta(minutes=6)
    assert signed_changes.decision_error(state, decision, late) is None


def test_a_reused_request_id_needs_naming_and_never_skips_the_decided_check():
    NOW, LATER = times()
    state, _ = signed_run(NOW)
    first = request(NOW, status=ApprovalStatus.APPROVED, decided_by="cfo")
    state.approvals.append(first)
    state.requests.request_approval(request(NOW))  # the model used call-1 again
    unnamed = state.requests.decision_error(DecideRequest(approve=True, by="cfo"))
    assert unnamed is not None and "more than one request had the id call-1" in unnamed
    assert (
        state.requests.decision_error(DecideRequest(approve=True, request_id="call-1", by="cfo"))
        is None
    )
    state.requests.apply_decision(DecideRequest(approve=True, request_id="call-1", by="cfo"), LATER)
    again = state.requests.decision_error(
        DecideRequest(approve=True, request_id="call-1", by="cfo")
    )
    assert again is not None and "already approved by cfo" in again


def test_answers_count_only_signed_for_their_question_and_text():
    NOW, LATER = times()
    state, signer = signed_run(NOW)
    question = Question(question_id="q-1", question="Which invoice?", step=1, asked_at=NOW)
    state.requests.ask(question)
    unsigned = Answer(question_id="q-1", answer="INV-1", by="dan")
    assert "unsigned answer" in refused(signed_changes.answer_error(state, unsigned, LATER))
    forger, _ = new_key()
    forged = Signer(forger, "k").answer(state.store_key, "dan", question, "INV-1")
    forged_answer = unsigned.model_copy(update={"signed": forged})
    assert "forged signature" in refused(signed_changes.answer_error(state, forged_answer, LATER))
    signed = signer.answer(state.store_key, "dan", question, "INV-1")
    other_text = Answer(question_id="q-1", answer="INV-2", by="dan", signed=signed)
    assert "digest differs" in refused(signed_changes.answer_error(state, other_text, LATER))
    ok = Answer(question_id="q-1", answer="INV-1", by="dan", signed=signed)
    assert signed_changes.answer_error(state, ok, LATER) is None


def test_a_budget_raise_signed_for_2_dollars_does_not_count_for_2000():
    NOW, LATER = times()
    state, signer = signed_run(NOW)
    asked = BudgetRaise(by="cfo", usd=2.0, tool_calls=5, comment="a little more")
    signed = signer.change(state.store_key, "cfo", "raise_budget", asked.what_it_says())
    as_signed = asked.model_copy(update={"signed": signed})
    assert (
        signed_changes.change_error(
            state, "raise_budget", "cfo", signed, as_signed.what_it_says(), LATER
        )
        is None
    )
    # The same signature and comment on other figures: each limit is covered.
    for inflated in (
        as_signed.model_copy(update={"usd": 2000.0}),
        as_signed.model_copy(update={"tool_calls": 500}),
        as_signed.model_copy(update={"tokens": 10**9}),
    ):
        error = signed_changes.change_error(
            state, "raise_budget", "cfo", signed, inflated.what_it_says(), LATER
        )
        assert "digest differs" in refused(error)


def test_a_change_signed_more_than_a_day_ago_is_stale():
    NOW, LATER = times()
    state, signer = signed_run(NOW)
    says = {"reason": "lunch"}

    def signed_at(at: datetime, nonce: str):
        return sign(signer.key, "k", run=state.store_key, by="ops", action="pause",
                    request_id=nonce, digest=digest_of(says), at=at.isoformat())  # fmt: skip

    # Within the day it counts (so the refusal below is about age, not the signature).
    recent = signed_at(LATER - timedelta(hours=23), "nonce-recent")
    assert signed_changes.change_error(state, "pause", "ops", recent, says, LATER) is None
    # Signed two days ago, its nonce never used: a copy kept that long counts no more.
    old = signed_at(LATER - timedelta(days=2), "nonce-old")
    assert "is stale" in refused(
        signed_changes.change_error(state, "pause", "ops", old, says, LATER)
    )


def test_a_change_bound_to_a_moment_counts_in_that_timeline_only():
    """A rewind takes the run back to a state without the change's nonce; the moment the
    change was signed for is then gone, or is another moment of the same number."""
    NOW, LATER = times()
    state, signer = signed_run(NOW)
    says = {"reason": "lunch"}

    def moment(offset: int, at: datetime, kind: str = "model") -> RunEvent:
        return RunEvent(offset=offset, at=at, kind=kind, status=RunStatus.RUNNING)

    arrange(state, events=[moment(i, NOW + timedelta(seconds=i)) for i in range(1, 6)])
    bound = signer.change(state.store_key, "ops", "pause", says, state.events[-1])
    assert signed_changes.change_error(state, "pause", "ops", bound, says, LATER) is None
    # Rewound to moment 3: moment 5 is gone.
    arrange(state, events=state.events[:3])
    gone = signed_changes.change_error(state, "pause", "ops", bound, says, LATER)
    assert "moment 5, which this run does not hold now" in refused(gone)
    # It went on from there: moments 4 and 5 again, later.
    arrange(
        state, events=[*state.events, *(moment(i, LATER + timedelta(seconds=i)) for i in (4, 5))]
    )
    other = signed_changes.change_error(state, "pause", "ops", bound, says, LATER)
    assert "another moment 5 (the run was rewound)" in refused(other)
    # Bound to a moment both timelines share: it counts (that moment is the one signed for).
    shared = signer.change(state.store_key, "ops", "pause", says, state.events[2])
    assert signed_changes.change_error(state, "pause", "ops", shared, says, LATER) is None
    # A signer that binds no moment (an older client) is not checked for one.
    unbound = signer.change(state.store_key, "ops", "pause", says)
    assert signed_changes.change_error(state, "pause", "ops", unbound, says, LATER) is None
