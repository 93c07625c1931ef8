"""What people send a run, as signals and updates: decisions, answers, pause, resume,
cancel, edits, rewinds and budget raises, each with its optional signature
(workflows/signing.py); validated before they change anything (invariant 6)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
)

from durable_agents.workflows.contract_base import (
    NAME,
    BudgetLimits,
    CompactModel,
    StepTitle,
    StrictModel,
)


class BudgetRaise(BudgetLimits):
    """Update payload for `raise_budget` (and the signal a parent sends its child): the new
    budget, each limit given at least what is spent; limits left out stay as they were."""

    by: str = NAME
    comment: str = Field(default="", max_length=2000)
    signed: SignedDecision | None = None
    # Set by a parent passing a person's raise on to its sub-agent: the raise as signed,
    # which the sub-agent verifies (its own limits may not pass the signed ones).
    forwarded: BudgetRaise | None = None

    def what_it_says(self) -> dict[str, Any]:
        """What a signature over this raise covers."""
        return {"limits": self.limits(), "comment": self.comment}


class KeyRevocation(StrictModel):
    """Signal payload for `revoke_keys`: trusted keys whose signatures count no more in
    this run (a leaked key). It only takes trust away, so it needs no signature itself."""

    key_ids: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        min_length=1, max_length=100
    )
    by: str = NAME
    reason: str = Field(default="", max_length=500)


# Every input a person may sign (workflows/signing.py, workflows/signed_changes.py): the
# people inputs' one list (tests/workflows/test_signature_doors.py has a row for each).
Action = Literal[
    "approve", "reject", "answer", "raise_budget", "edit", "pause", "resume", "cancel",
    "fork", "rewind", "message", "await_reply", "end_conversation", "subject",
]  # fmt: skip


# The actions signed for a request or question (its id is the signature's request_id).
ON_REQUESTS: frozenset[Action] = frozenset({"approve", "reject", "answer"})
# The changes a run passes on to the sub-agent it waits on (`RunContext.forward`): a
# signature naming a run above counts in a sub-agent for these only.
FORWARDED: frozenset[Action] = frozenset({"pause", "resume", "raise_budget"})


class SignedDecision(CompactModel):
    """Who changed what, on which request (or under which nonce), when: signed with a key
    the run's policy trusts (workflows/signing.py). Verified in workflow code. Compact: a
    signature without a moment is written as it was before v3 (an older worker reads it)."""

    # 1: decisions and answers over their arguments; 2: every change; 3: a decision or
    # answer bound to the run's moment its signer saw (workflows/signing.py).
    v: int = Field(default=1, ge=1, le=3)
    key_id: str = Field(min_length=1, max_length=100)
    # The run's identity (workflow id @ first execution): a signature for one run, or for
    # an earlier run under a reused id, never counts in another.
    run: str = Field(min_length=1, max_length=300)
    by: str = NAME
    action: Action
    # The request or question decided; for a change to the run itself, a fresh nonce.
    request_id: str = Field(min_length=1, max_length=200)
    # sha256 of what the change says (workflows/signing.py: the digests).
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    at: str = Field(min_length=1, max_length=40)
    signature: str = Field(min_length=1, max_length=200)
    # v3: the moment of the run its signer saw (signing.moment_tag); it counts only while
    # the run holds that very moment, as a change's bound nonce does.
    moment: str | None = Field(default=None, max_length=60)


class Decision(StrictModel):
    """Signal payload for `approve` / `reject`. Every field is optional so a bare `{}`
    works when exactly one request waits."""

    request_id: str | None = Field(default=None, max_length=200)
    by: str = Field(default="anonymous", min_length=1, max_length=100)
    comment: str = Field(default="", max_length=2000)
    signed: SignedDecision | None = None


class DecideRequest(StrictModel):
    """A decision with its verdict: the `decide` update's payload (with an answer back),
    and how every decision travels inside a run (the `approve` and `reject` signals'
    become one, `with_verdict`), so the verdict never goes beside it as a bool."""

    request_id: str | None = Field(default=None, max_length=200)
    approve: bool
    by: str = NAME
    comment: str = Field(default="", max_length=2000)
    signed: SignedDecision | None = None

    def as_decision(self) -> Decision:
        return Decision(
            request_id=self.request_id, by=self.by, comment=self.comment, signed=self.signed
        )

    @classmethod
    def with_verdict(cls, decision: Decision, *, approve: bool) -> DecideRequest:
        """A signal's decision with the verdict its signal's name gave it."""
        return cls(approve=approve, **decision.model_dump())


class Answer(StrictModel):
    """Signal and update payload for `answer`: the reply to a question the model asked."""

    question_id: str | None = Field(default=None, max_length=200)
    answer: str = Field(min_length=1, max_length=4000)
    by: str = Field(default="anonymous", min_length=1, max_length=100)
    signed: SignedDecision | None = None


class Actor(StrictModel):
    """Signal payload for `pause`, `resume` and `cancel`: who acts, and why."""

    by: str = Field(default="anonymous", min_length=1, max_length=100)
    reason: str = Field(default="", max_length=2000)
    signed: SignedDecision | None = None

    def what_it_says(self) -> dict[str, Any]:
        """What a signature covers (pause, resume, cancel, end_conversation)."""
        return {"reason": self.reason}


class RewindRequest(StrictModel):
    """Update payload for `authorize_rewind`: who rewinds the run to which moment. The run
    checks it (and its signature, when its policy asks) before `agentctl rewind` resets."""

    by: str = NAME
    moment: int = Field(ge=1)
    signed: SignedDecision | None = None

    def what_it_says(self) -> dict[str, Any]:
        return {"moment": self.moment}


class StatePatch(StrictModel):
    """Update payload for `edit`. Only the fields given change; at least one must be."""

    by: str = NAME
    goal: str | None = Field(default=None, min_length=1, max_length=4000)
    # Replaces the steps not started yet; done and running steps stay as they are.
    pending_steps: list[StepTitle] | None = Field(default=None, max_length=5000)
    # Replaces the gathered context.
    context: list[Annotated[str, Field(max_length=2000)]] | None = Field(
        default=None, max_length=200
    )
    signed: SignedDecision | None = None

    def changes(self) -> dict[str, Any]:
        return self.model_dump(exclude={"by", "signed"}, exclude_none=True)


# Finished at import, as contracts.py says why (it names itself, through `forwarded`).
BudgetRaise.model_rebuild()
