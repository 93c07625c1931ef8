"""Whether a person's change to a run counts, when the run's policy requires signatures.

One place for every kind of change (decide, answer, raise a budget, edit, pause, resume,
cancel, rewind): what the signature must say, checked against the run's state, and the
nonces it used. The handlers call these before they change anything; a refusal is
recorded by the caller (RunState.refuse), so the audit keeps every attempt. Everything
signed for this run and bound to a moment (a v3 decision or answer, a change's bound
nonce) counts only while the run holds that moment: one rule, `signing.moment_error`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from durable_agents.workflows.people_inputs import (
    FORWARDED,
    Answer,
    BudgetRaise,
    DecideRequest,
    SignedDecision,
)
from durable_agents.workflows.records import SignedUse
from durable_agents.workflows.signing import (
    FRESH_FOR,
    NEWEST,
    Action,
    Expected,
    answer_digest,
    answer_v2_digest,
    arguments_digest,
    binding_error,
    decision_digest,
    digest_of,
    moment_error,
    signature_error,
)
from durable_agents.workflows.state import RunState
from durable_agents.workflows.state.budget_book import BudgetBook
from durable_agents.workflows.state.moments import Moments
from durable_agents.workflows.state.origin import Origin
from durable_agents.workflows.state.requests import PeopleRequests
from durable_agents.workflows.state.signatures import Signatures
from durable_agents.workflows.state.terms import Terms


@dataclass(frozen=True)
class Signing:
    """The records a signed change is checked against: the run's identity (and the runs
    above it), its policy, the signatures that count and were used, its moments, and
    its requests (a decision or an answer). A part that checks signatures is handed it;
    the state whole (RunState) has the same records, by the same names."""

    origin: Origin
    terms: Terms
    signatures: Signatures
    moments: Moments
    requests: PeopleRequests


# What the checks below read: a part's Signing, or the state whole.
SignedRun = Signing | RunState


def runs_above(origin: Origin) -> list[str]:
    """The identities of the runs that delegated to this one, its parent's last."""
    return list(origin.delegated_by.identities) if origin.delegated_by else []


def runs_signed_for(origin: Origin) -> tuple[str, ...]:
    """Whose signatures count here: this run's identity, and those of the runs above it
    (a change signed there and forwarded down)."""
    return (origin.store_key, *runs_above(origin))


def forwarded_raise_error(book: BudgetBook, raise_: BudgetRaise) -> str | None:
    """Why a parent's `budget` signal may not apply: the share it gives the sub-agent passes
    what the person signed, or what the sub-agent had for a limit they did not raise."""
    original = raise_.forwarded
    if original is None:
        return None
    if original.forwarded is not None:
        return "a forwarded raise forwards one raise, as it was signed"
    if raise_.by != original.by:  # the audit names who signed, nobody else
        return f"a raise signed by {original.by!r} forwarded as {raise_.by!r}"
    signed, current = original.limits(), book.budget.model_dump() if book.budget else {}
    for name, value in raise_.limits().items():
        cap = signed.get(name, current.get(name))
        if cap is None or value > cap:
            return f"the forwarded {name} ({value:g}) passes what was raised ({cap})"
    return None


def decision_error(run: SignedRun, decision: DecideRequest, now: datetime) -> str | None:
    """Why a decision that run.requests.decision_error() accepted still does not count."""
    request = run.requests.find_pending_approval(decision.request_id)
    assert request is not None, "checked after run.requests.decision_error()"
    action: Action = "approve" if decision.approve else "reject"
    if run.signatures.signature_version == 1:
        digest = arguments_digest(request.arguments)
    else:
        digest = decision_digest(request.tool, request.step, request.arguments, decision.comment)
    wanted = Expected(
        runs=(run.origin.store_key,),
        by=decision.by,
        action=action,
        request_id=request.request_id,
        digest=digest,
        not_before=request.requested_at,
        not_after=request.deadline if run.signatures.people_checks >= 2 else None,
        now=now,
    )
    return _error(run, decision.signed, wanted) or _moment_error(run, decision.signed)


def answer_error(run: SignedRun, answer: Answer, now: datetime) -> str | None:
    """Why an answer that RunState.answer_error() accepted still does not count."""
    question = run.requests.find_pending_question(answer.question_id)
    assert question is not None, "checked after RunState.answer_error()"
    if run.signatures.signature_version == 1:
        digest = answer_digest(answer.answer)
    else:
        digest = answer_v2_digest(question.question, question.step, answer.answer)
    wanted = Expected(
        runs=(run.origin.store_key,),
        by=answer.by,
        action="answer",
        request_id=question.question_id,
        digest=digest,
        not_before=question.asked_at,
        not_after=question.deadline if run.signatures.people_checks >= 2 else None,
        now=now,
    )
    return _error(run, answer.signed, wanted) or _moment_error(run, answer.signed)


def change_error(
    run: SignedRun,
    action: Action,
    by: str,
    signed: SignedDecision | None,
    says: Any,
    now: datetime,
    runs: tuple[str, ...] | None = None,
    version: int | None = None,
) -> str | None:
    """Why a change to the run itself (a budget, an edit, a pause...) does not count.
    Runs taking v1 signatures signed decisions only: their other changes count as sent.
    `runs`: whose identity the signature must name (default: this run's, or above it);
    `version`: the signatures taken, where the run has not settled them yet (else its own)."""
    version = run.signatures.signature_version if version is None else version
    if not run.terms.policy.require_signed_decisions or version == 1:
        return None
    wanted = Expected(
        runs=runs or runs_signed_for(run.origin),
        by=by,
        action=action,
        request_id=None,
        digest=digest_of(says),
        now=now,
        used=frozenset(use.nonce for use in run.signatures.signed_nonces),
    )
    error = _error(run, signed, wanted, version)
    above = signed.run if signed is not None and signed.run != run.origin.store_key else None
    # Signed for a run above: the parent passes on pause, resume and budgets, having
    # checked them there; anything else sent straight here was never checked.
    passed_on = action in FORWARDED or runs is not None or version < NEWEST
    if error is None and above and not passed_on:
        return f"a {action} signed for run {above} counts only there: sign it for this run"
    if error is None and signed is not None and signed.run == run.origin.store_key:
        # A change bound to a moment of this run counts in that timeline only: a copy sent
        # after a rewind (its nonce forgotten with the state) finds the moment gone.
        return binding_error(signed.request_id, run.moments.events)
    return error


def note_used(run: SignedRun, signed: SignedDecision | None, now: datetime) -> None:
    """Remember a counted change's nonce (a copy sent again is refused), forgetting those
    too old to count anyway."""
    if signed is None or not run.terms.policy.require_signed_decisions:
        return
    fresh = [use for use in run.signatures.signed_nonces if use.at >= now - FRESH_FOR]
    at = datetime.fromisoformat(signed.at)
    run.signatures.remember_nonces([*fresh, SignedUse(nonce=signed.request_id, at=at)])


def _moment_error(run: SignedRun, signed: SignedDecision | None) -> str | None:
    """A v3 decision or answer counts only at the moment its signer saw (as a bound change
    does): a copy sent after a rewind finds that moment gone, or another. v1 and v2
    signatures are bound to no moment (runs recorded before v3 replay as they ran)."""
    if signed is None or signed.v < 3 or not run.terms.policy.require_signed_decisions:
        return None
    return moment_error(signed.moment, run.moments.events)


def _error(
    run: SignedRun,
    signed: SignedDecision | None,
    wanted: Expected,
    version: int | None = None,
) -> str | None:
    if signed is not None and signed.key_id in run.signatures.revoked_keys:
        return f"the key {signed.key_id!r} was revoked: its signatures count no more"
    error = signature_error(
        run.terms.policy,
        signed,
        wanted,
        version=run.signatures.signature_version if version is None else version,
    )
    if error is not None and signed is None and wanted.action in ("approve", "reject"):
        return f"unsigned decision by {wanted.by!r}: this run counts only signed decisions"
    return error
