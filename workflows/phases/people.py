"""A person's action on the run: decide, answer, or change the run (a budget, an edit,
pause, resume, cancel, rewind). One path each, shared by the signal (fire and forget: a
refusal is a warning in the worker's log) and the update (a refusal is the caller's error):
check the state, check the signature when the policy requires one, apply, publish, note
the moment. A refusal of a signed-changes rule is recorded in the audit either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows import signed_changes
    from durable_agents.workflows.event_kinds import EventKind
    from durable_agents.workflows.people_inputs import Answer, DecideRequest, SignedDecision
    from durable_agents.workflows.records import ApprovalRequest, Question
    from durable_agents.workflows.signing import Action

from durable_agents.workflows.phases.context import Phase, RunContext
from durable_agents.workflows.phases.inputs import refuse_if

Done = TypeVar("Done")


class Refused(Exception):
    """A person's action that does not count. `recorded`: the audit holds the refusal (a
    signature rule broken), as opposed to an action the state had no place for."""

    def __init__(self, error: str, *, recorded: bool) -> None:
        super().__init__(error)
        self.error, self.recorded = error, recorded


class PeopleActions(Phase):
    """A person's decision, answer or change, checked (and its signature) before it counts."""

    def __init__(self, ctx: RunContext, *, signing: signed_changes.Signing) -> None:
        super().__init__(ctx)
        self.signing = signing
        self.requests = signing.requests

    def decide(self, decision: DecideRequest) -> ApprovalRequest:
        """A person's decision, received: checked, then applied."""
        if (error := self.requests.decision_error(decision)) is not None:
            raise Refused(error, recorded=False)
        self.ctx.settle_signatures()
        now = workflow.now()
        if error := signed_changes.decision_error(self.signing, decision, now):
            self.ctx.refuse(decision.by, error)
            raise Refused(error, recorded=True)
        decided = self.requests.apply_decision(decision, now)
        self.ctx.moment(decided.status.moment, f"{decided.tool} by {decision.by}")
        return decided

    def answer(self, answer: Answer) -> Question:
        if (error := self.requests.answer_error(answer)) is not None:
            raise Refused(error, recorded=False)
        self.ctx.settle_signatures()
        if (error := signed_changes.answer_error(self.signing, answer, workflow.now())) is not None:
            self.ctx.refuse(answer.by, error)
            raise Refused(error, recorded=True)
        question = self.requests.answer(answer, workflow.now())
        self.ctx.moment(EventKind.ANSWERED, answer.by)
        return question

    def counts(self, action: Action, by: str, signed: SignedDecision | None, says: Any) -> bool:
        """Whether a person's change counts (always, unless the policy requires signed
        changes); one that does not is refused in the audit, and nothing else changes."""
        return self._change_refused(action, by, signed, says) is None

    def must_count(self, action: Action, by: str, signed: SignedDecision | None, says: Any) -> None:
        """`_counts` for an update: a refusal is recorded, then raised to the caller."""
        refuse_if(self._change_refused(action, by, signed, says))

    def _change_refused(
        self, action: Action, by: str, signed: SignedDecision | None, says: Any
    ) -> str | None:
        self.ctx.settle_signatures()
        now = workflow.now()
        error = signed_changes.change_error(self.signing, action, by, signed, says, now)
        if error is not None:
            self.ctx.refuse(by, error)
            workflow.logger.warning("%s refused: %s", action, error)
            return error
        signed_changes.note_used(self.signing, signed, now)
        return None


def as_signal(what: str, act: Callable[[], object]) -> None:
    """A signal's way with a refusal: a warning, nothing else."""
    try:
        act()
    except Refused as refused:
        verdict = "refused" if refused.recorded else "ignored"
        workflow.logger.warning("%s %s: %s", what, verdict, refused.error)


def as_update(act: Callable[[], Done]) -> Done:
    """An update's way with a refusal: the caller's error (InputRefused)."""
    try:
        return act()
    except Refused as refused:
        error = refused.error
    # Raised outside the handler: the caller's failure carries no Refused as its cause.
    raise ApplicationError(error, type="InputRefused", non_retryable=True)
