"""Every door a signed people input comes through, times every way its signature can fail
(issue 45, item 7), judged on the run's state alone as the handlers judge it
(workflows/signed_changes.py, workflows/subject_grants.py).

The rows come from the code's own list of what a person may sign (`people_inputs.Action`):
an input kind added there without a door here fails `test_every_signed_input_has_a_door`.
A cell that cannot apply is in NOT_APPLICABLE, with the reason, and is reported skipped.
Each cell first shows the honest input counting in the very same state, so its refusal is
the failure's doing. tests/integration/test_signed_moments.py sends a few rows for real.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast, get_args

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from durable_agents.control.signer import Signer
from durable_agents.workflows import signed_changes
from durable_agents.workflows.contracts import RunPolicy, SubjectKey, TrustedKey
from durable_agents.workflows.conversation_records import ReplyWanted, UserMessage
from durable_agents.workflows.people_inputs import (
    Action,
    Actor,
    Answer,
    BudgetRaise,
    DecideRequest,
    RewindRequest,
    SignedDecision,
    StatePatch,
)
from durable_agents.workflows.records import ApprovalRequest, Question, RunEvent, RunStatus
from durable_agents.workflows.signing import (
    CLOCK_SKEW,
    FRESH_FOR,
    NEWEST,
    moment_tag,
    new_key,
    sign,
)
from durable_agents.workflows.state import RunState
from durable_agents.workflows.subject_grants import grant_error
from tests.conftest import arrange

FAILURES = (
    "unsigned",
    "another run",
    "stale",
    "future-dated",
    "rewound",
    "revoked",
    "past its deadline",
    "after an escalation",
)
ON_REQUESTS = ("approve", "reject", "answer")
CHANGES = (
    "raise_budget", "edit", "pause", "resume", "cancel", "rewind", "message", "await_reply",
    "end_conversation",
)  # fmt: skip

_NO_REQUEST = "a change names no request: it has no deadline (it is stale after a day)"
_NO_ESCALATION = "only an approval escalates; this input decides no request"
NOT_APPLICABLE: dict[tuple[str, str], str] = {
    **{(kind, "past its deadline"): _NO_REQUEST for kind in (*CHANGES, "fork")},
    **{(kind, "after an escalation"): _NO_ESCALATION for kind in (*CHANGES, "fork", "subject")},
    ("answer", "after an escalation"): "a question expires at its deadline; it never escalates",
    ("fork", "rewound"): (
        "a fork is a new run that names its parent's moment in what it signs; the state it "
        "carries must be the parent's own at that moment (patch fork-state-checked-with-its-"
        "parents-record) and its signature starts that one fork id once"
    ),
    ("subject", "stale"): (
        "a grant has no age: it names one run and is checked once, as that run starts (the "
        "same id started again with it is refused)"
    ),
    ("subject", "rewound"): "checked once as the run starts, before it has any moment",
    ("subject", "past its deadline"): "a grant answers no request, so it has no deadline",
}


def times() -> tuple[datetime, datetime]:
    """When the request was made, and the workflow's time now: the signer signs with the
    wall clock's time, read when each test runs."""
    now = datetime.now(UTC)
    return now - timedelta(minutes=1), now + timedelta(seconds=1)


def moments(first: int, last: int, start: datetime) -> list[RunEvent]:
    return [
        RunEvent(offset=i, at=start + timedelta(seconds=i), kind="model", status=RunStatus.RUNNING)
        for i in range(first, last + 1)
    ]


# The run's verdict on one input: None when it counts, else why not (one line).
Judge = Callable[["Case", SignedDecision | None, datetime], "str | None"]


@dataclass
class Case:
    """One run waiting for one input, with its honest signature made by our signer."""

    kind: str
    state: RunState
    key: Ed25519PrivateKey
    asked: datetime
    now: datetime
    deadline: datetime
    judge: Judge
    signed: SignedDecision
    keys: dict[str, SubjectKey] = field(default_factory=dict)  # a subject grant's
    request: ApprovalRequest | None = None

    def verdict(self, signed: SignedDecision | None, now: datetime | None = None) -> str | None:
        return self.judge(self, signed, now or self.now)

    def resigned(self, **changes: Any) -> SignedDecision:
        """The honest signature with fields changed, signed again by the trusted key."""
        fields = self.signed.model_dump(exclude={"signature"}) | changes
        version = fields.pop("v")
        return sign(self.key, **fields, version=version)


def new_case(kind: str) -> Case:
    asked, now = times()
    key, public = new_key()
    policy = RunPolicy(
        require_signed_decisions=True,
        trusted_keys={"k": TrustedKey(public_key=public)},
        approvers={"pay_invoice": ["alice", "cfo"]},
        on_timeout="escalate",
        escalate_to=["cfo"],
    )
    state = RunState(run_id="r", identity="r@1", goal="g", policy=policy, created_at=asked,
                     updated_at=asked, signature_version=NEWEST, people_checks=2)  # fmt: skip
    arrange(state, events=moments(1, 5, asked), moment=5)
    signer, latest = Signer(key, "k"), state.events[-1]
    deadline = now + timedelta(minutes=10)
    case: dict[str, Any] = {"kind": kind, "state": state, "key": key, "asked": asked}
    case |= {"now": now, "deadline": deadline}
    if kind in ("approve", "reject"):
        request = ApprovalRequest(request_id="call-1", tool="pay_invoice", reason="",
                                  arguments={"amount": "1250.00", "currency": "EUR"}, step=3,
                                  requested_at=asked, deadline=deadline)  # fmt: skip
        state.requests.request_approval(request)
        approved = kind == "approve"
        signed = signer.approval("r@1", "alice", approved, request, "ok", NEWEST, latest)
        return Case(**case, judge=_decision(approved), signed=signed, request=request)
    if kind == "answer":
        question = Question(question_id="q-1", question="Which invoice?", step=2,
                            asked_at=asked, deadline=deadline)  # fmt: skip
        state.requests.ask(question)
        signed = signer.answer("r@1", "alice", question, "INV-1", NEWEST, latest)
        return Case(**case, judge=_answer, signed=signed)
    if kind == "fork":
        # The fork's own state, from its parent p@1's; it counts what p@1's signer signed.
        fork = state.model_copy(update={"run_id": "f", "identity": "f@1"})
        signed = signer.change("p@1", "alice", "fork", FORK_SAYS)
        return Case(**{**case, "state": fork}, judge=_fork, signed=signed)
    if kind == "subject":
        keys = {"k": SubjectKey(public_key=public, namespaces=["customer/*"])}
        signed = signer.subject_grant("r", SUBJECT)
        return Case(**case, judge=_grant, signed=signed, keys=keys)
    action = cast(Action, kind)
    signed = signer.change("r@1", "alice", action, CHANGE_SAYS[kind], latest)
    return Case(**case, judge=_change(action, CHANGE_SAYS[kind]), signed=signed)


FORK_SAYS = {"parent": "p", "moment": 4, "edit": None, "fork": "f"}
SUBJECT = {"customer": "c-42"}
CHANGE_SAYS: dict[str, Any] = {
    "raise_budget": BudgetRaise(by="alice", usd=2.0, comment="a little more").what_it_says(),
    "edit": StatePatch(by="alice", goal="pay mallory instead").changes(),
    "pause": Actor(by="alice").what_it_says(),
    "resume": Actor(by="alice", reason="back").what_it_says(),
    "cancel": Actor(by="alice", reason="stop").what_it_says(),
    "rewind": RewindRequest(by="alice", moment=3).what_it_says(),
    "message": UserMessage(message_id="m-1", text="Refund A-1001", by="alice").what_it_says(),
    "await_reply": ReplyWanted(message_id="m-1", by="alice").what_it_says(),
    "end_conversation": Actor(by="alice", reason="done").what_it_says(),
}


def _decision(approved: bool) -> Judge:
    def judge(case: Case, signed: SignedDecision | None, now: datetime) -> str | None:
        decision = DecideRequest(
            approve=approved, request_id="call-1", by="alice", comment="ok", signed=signed
        )
        return case.state.requests.decision_error(decision) or signed_changes.decision_error(
            case.state, decision, now
        )

    return judge


def _answer(case: Case, signed: SignedDecision | None, now: datetime) -> str | None:
    answer = Answer(question_id="q-1", answer="INV-1", by="alice", signed=signed)
    return case.state.requests.answer_error(answer) or signed_changes.answer_error(
        case.state, answer, now
    )


def _change(action: Any, says: Any) -> Judge:
    def judge(case: Case, signed: SignedDecision | None, now: datetime) -> str | None:
        return signed_changes.change_error(case.state, action, "alice", signed, says, now)

    return judge


def _fork(case: Case, signed: SignedDecision | None, now: datetime) -> str | None:
    return signed_changes.change_error(
        case.state, "fork", "alice", signed, FORK_SAYS, now, runs=("p@1",)
    )


def _grant(case: Case, signed: SignedDecision | None, now: datetime) -> str | None:
    return grant_error(signed, subject=SUBJECT, namespace="customer/c-42", keys=case.keys,
                       run_id="r", scheduled_by=None, now=now)  # fmt: skip


# -- the failures: each makes the honest input fail one way, and says what the run says --


def unsigned(case: Case) -> tuple[SignedDecision | None, datetime, str]:
    said = "no grant says it may be" if case.kind == "subject" else "unsigned"
    return None, case.now, said


def another_run(case: Case) -> tuple[SignedDecision | None, datetime, str]:
    said = "not this run" if case.kind == "subject" else "run differs"
    return case.resigned(run="someone-else@1"), case.now, said


def stale(case: Case) -> tuple[SignedDecision | None, datetime, str]:
    if case.kind not in ON_REQUESTS:  # a change named by a nonce counts within a day
        return case.resigned(at=_at(case.now - FRESH_FOR - timedelta(hours=1))), case.now, "stale"
    # A decision or answer signed before its request existed: for an earlier one of the id.
    early = _at(case.asked - CLOCK_SKEW - timedelta(minutes=1))
    return case.resigned(at=early), case.now, "older than the request"


def future_dated(case: Case) -> tuple[SignedDecision | None, datetime, str]:
    # Within the clock skew ahead it still counts: the refusal is about the date alone.
    assert case.verdict(case.resigned(at=_at(case.now + CLOCK_SKEW - timedelta(minutes=1)))) is None
    ahead = case.resigned(at=_at(case.now + CLOCK_SKEW + timedelta(minutes=1)))
    return ahead, case.now, "in the future"


def rewound(case: Case) -> tuple[SignedDecision | None, datetime, str]:
    # Back to moment 3, then on again: moments 4 and 5 are others now. The request (or
    # question) was asked again, the same: only the moment the signer saw tells it apart.
    arrange(case.state, events=[*case.state.events[:3], *moments(4, 5, case.now)])
    return case.signed, case.now, "the run was rewound"


def revoked(case: Case) -> tuple[SignedDecision | None, datetime, str]:
    if case.kind == "subject":  # a subject key is revoked by taking it out of the setting
        case.keys.clear()
        return case.signed, case.now, "grants nothing here"
    arrange(case.state, revoked_keys=["k"])
    return case.signed, case.now, "was revoked"


def past_its_deadline(case: Case) -> tuple[SignedDecision | None, datetime, str]:
    # Within the skew after the deadline it counts (as runs do); past it, no more.
    assert case.verdict(case.signed, case.deadline + CLOCK_SKEW - timedelta(minutes=1)) is None
    return case.signed, case.deadline + CLOCK_SKEW + timedelta(minutes=1), "deadline"


def after_an_escalation(case: Case) -> tuple[SignedDecision | None, datetime, str]:
    # alice signed while she could decide; the request escalated to the cfo meanwhile.
    assert case.request is not None
    case.state.requests.escalate(case.request, case.deadline + timedelta(hours=1), case.now)
    return case.signed, case.now, "alice may not decide pay_invoice requests"


FAIL: dict[str, Callable[[Case], tuple[SignedDecision | None, datetime, str]]] = {
    "unsigned": unsigned,
    "another run": another_run,
    "stale": stale,
    "future-dated": future_dated,
    "rewound": rewound,
    "revoked": revoked,
    "past its deadline": past_its_deadline,
    "after an escalation": after_an_escalation,
}


def _at(when: datetime) -> str:
    return when.isoformat(timespec="seconds")


def cells() -> list[Any]:
    return [
        pytest.param(
            kind,
            failure,
            id=f"{kind}-{failure.replace(' ', '-')}",
            marks=[pytest.mark.skip(reason=NOT_APPLICABLE[kind, failure])]
            if (kind, failure) in NOT_APPLICABLE
            else [],
        )
        for kind in get_args(Action)
        for failure in FAILURES
    ]


def test_every_signed_input_has_a_door():
    """A kind of input added to what people may sign needs its row here; every failure
    has its way to fail, and every cell that does not apply names a real cell."""
    kinds = set(get_args(Action))
    assert kinds == {*ON_REQUESTS, *CHANGES, "fork", "subject"}, kinds
    assert set(FAIL) == set(FAILURES)
    assert {kind for kind, _ in NOT_APPLICABLE} <= kinds
    assert {failure for _, failure in NOT_APPLICABLE} <= set(FAILURES)


@pytest.mark.parametrize(("kind", "failure"), cells())
def test_a_signature_that_fails_does_not_count(kind: str, failure: str):
    case = new_case(kind)
    assert case.verdict(case.signed) is None, "the honest input must count"
    sent, now, said = FAIL[failure](case)
    error = case.verdict(sent, now)
    assert error is not None, f"{kind} {failure}: it counted"
    assert said in error, error
    assert "\n" not in error


def test_our_signers_bind_decisions_and_answers_to_the_moment_they_saw():
    """Where a run takes v3, the signer binds; where it takes v2 (a run on an older build)
    it signs v2 as before; for a run that takes v3 and a moment it did not see, it
    refuses to sign (the run counts no unbound decision)."""
    for kind in ON_REQUESTS:
        case = new_case(kind)
        seen = moment_tag(case.state.events[-1])
        assert (case.signed.v, case.signed.moment) == (3, seen)
        assert case.signed.request_id in ("call-1", "q-1")  # the request's id, unchanged
    asked, _ = times()
    request = ApprovalRequest(request_id="call-1", tool="pay_invoice", arguments={}, reason="",
                              step=1, requested_at=asked)  # fmt: skip
    signer, saw = Signer(new_key()[0], "k"), moments(1, 1, asked)[0]
    older_build = signer.approval("r@1", "alice", True, request, "", 2, saw)
    with pytest.raises(ValueError, match="latest moment could not be read"):
        signer.approval("r@1", "alice", True, request, "", NEWEST, None)
    assert (older_build.v, older_build.moment) == (2, None)
    assert "moment" not in older_build.model_dump(mode="json")  # as an older worker reads it


def test_a_conversation_checks_its_changes_as_v2_before_its_version_is_settled():
    """A conversation began after v2 signatures existed, so before its run has settled
    which signatures it takes (state's version still 1) a message is checked as v2
    (`Conversation._signing_version`): the honest v2 message counts, an unsigned one
    does not, as they would once settled."""
    case = new_case("message")
    arrange(case.state, signature_version=1)
    says = CHANGE_SAYS["message"]

    def verdict(signed: SignedDecision | None) -> str | None:
        return signed_changes.change_error(
            case.state, "message", "alice", signed, says, case.now, version=2
        )

    honest = Signer(case.key, "k").change("r@1", "alice", "message", says, case.state.events[-1])
    assert honest.v == 2
    assert verdict(honest) is None
    assert "unsigned message by 'alice'" in (verdict(None) or "")
    # Taken as the state says (v1: changes count as sent), the same unsigned one counts.
    assert signed_changes.change_error(case.state, "message", "alice", None, says, case.now) is None
