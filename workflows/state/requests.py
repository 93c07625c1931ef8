"""PeopleRequests: what the run asked of people (approvals of tool calls and of a spent
budget, questions), what waits for whom, and which decision or answer counts and what it
changes (workflows/signed_changes.py checks signatures)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.people_inputs import Answer, DecideRequest
from durable_agents.workflows.records import (
    ApprovalRequest,
    ApprovalStatus,
    Question,
    QuestionStatus,
    RunStatus,
)
from durable_agents.workflows.state.audit_log import AuditLog
from durable_agents.workflows.state.lifecycle import Lifecycle
from durable_agents.workflows.state.record import Record
from durable_agents.workflows.tools import ASK_HUMAN

T = TypeVar("T")


class PeopleRequests(Record):
    OWNS = frozenset({"approvals", "questions"})

    @property
    def pending_approvals(self) -> list[ApprovalRequest]:
        return [a for a in self._s.approvals if a.status is ApprovalStatus.PENDING]

    @property
    def pending_questions(self) -> list[Question]:
        return [q for q in self._s.questions if q.status is QuestionStatus.PENDING]

    def request_approval(self, request: ApprovalRequest) -> None:
        self._s.approvals.append(request)
        Lifecycle(self._s).wait_for(RunStatus.AWAITING_APPROVAL)
        AuditLog(self._s).log(request.requested_at, "policy", "approval_requested", request.tool)

    def find_pending_approval(self, request_id: str | None) -> ApprovalRequest | None:
        """The request a decision names, or the only one waiting when it names none."""
        return _named_or_only(self.pending_approvals, request_id, lambda a: a.request_id)

    def decision_error(self, decision: DecideRequest) -> str | None:
        if self._s.status.is_closed:
            return f"the run is {self._s.status.value}"
        if decision.request_id is not None:
            named = [a for a in self._s.approvals if a.request_id == decision.request_id]
            if not named:
                return f"no approval request {decision.request_id!r}"
            known = named[-1]  # the latest of that id: a model may reuse a tool call's id
            if not any(a.status is ApprovalStatus.PENDING for a in named):
                done = f"{known.status.value} by {known.decided_by}"
                return f"request {decision.request_id} was already {done}"
        request = self.find_pending_approval(decision.request_id)
        if request is None:
            pending = [a.request_id for a in self.pending_approvals]
            if not pending:
                return "no approval is pending"
            return f"several approvals are pending; name one of {', '.join(pending)}"
        same_id = [a for a in self._s.approvals if a.request_id == request.request_id]
        if decision.request_id is None and len(same_id) > 1:
            return f"more than one request had the id {request.request_id}: name it"
        if not self._s.policy.may_decide(request.tool, decision.by, request.escalated):
            return f"{decision.by} may not decide {request.tool} requests in this run"
        if request.is_budget and decision.approve:
            return "a spent budget is not approved but raised (raise_budget), or rejected to stop"
        return None

    def apply_decision(self, decision: DecideRequest, now: datetime) -> ApprovalRequest:
        request = self.find_pending_approval(decision.request_id)
        assert request is not None, "apply_decision() for a decision that cannot apply"
        request.status = ApprovalStatus.APPROVED if decision.approve else ApprovalStatus.REJECTED
        request.decided_by, request.decided_at = decision.by, now
        request.comment = decision.comment
        Lifecycle(self._s).leave_wait()
        detail = f"{request.tool} {request.request_id}"
        AuditLog(self._s).log(now, decision.by, request.status.value, detail)
        return request

    def escalate(self, request: ApprovalRequest, deadline: datetime, now: datetime) -> None:
        request.escalated, request.deadline = True, deadline
        AuditLog(self._s).log(now, "deadline", "escalated", f"{request.tool} {request.request_id}")

    def ask(self, question: Question) -> None:
        self._s.questions.append(question)
        Lifecycle(self._s).wait_for(RunStatus.AWAITING_INPUT)
        detail = preview(question.question, 80)
        AuditLog(self._s).log(question.asked_at, "model", "question_asked", detail)

    def answer_error(self, answer: Answer) -> str | None:
        if self._s.status.is_closed:
            return f"the run is {self._s.status.value}"
        if answer.question_id is not None:
            named = [q for q in self._s.questions if q.question_id == answer.question_id]
            if not named:
                return f"no question {answer.question_id!r}"
            if named[0].status is not QuestionStatus.PENDING:
                return f"question {answer.question_id} is already {named[0].status.value}"
        question = self.find_pending_question(answer.question_id)
        if question is None:
            return "no question is pending" if not self.pending_questions else "name the question"
        if question.options is not None and answer.answer not in question.options:
            return f"answer must be one of {', '.join(question.options)}"
        if self._s.people_checks >= 2 and not self._s.policy.may_decide(ASK_HUMAN, answer.by):
            return f"{answer.by} may not answer this run's questions"
        return None

    def answer(self, answer: Answer, now: datetime) -> Question:
        question = self.find_pending_question(answer.question_id)
        assert question is not None, "answer() called for an answer that cannot apply"
        question.status, question.answer = QuestionStatus.ANSWERED, answer.answer
        question.answered_by, question.answered_at = answer.by, now
        Lifecycle(self._s).leave_wait()
        AuditLog(self._s).log(now, answer.by, "answered", question.question_id)
        return question

    def expire(self, question: Question, now: datetime) -> None:
        question.status = QuestionStatus.EXPIRED
        Lifecycle(self._s).leave_wait()
        AuditLog(self._s).log(now, "deadline", "question_expired", question.question_id)

    def find_pending_question(self, question_id: str | None) -> Question | None:
        """The question an answer names, or the only one waiting when it names none."""
        return _named_or_only(self.pending_questions, question_id, lambda q: q.question_id)

    def close_all(self, now: datetime) -> None:
        """The run is cancelled: nothing it asked waits any more."""
        for request in self.pending_approvals:
            request.status = ApprovalStatus.REJECTED
            request.decided_by, request.decided_at = "cancelled", now
        for question in self.pending_questions:
            question.status = QuestionStatus.EXPIRED

    def approve_budget_requests(self, by: str, comment: str, now: datetime) -> None:
        """A raise approves the budget request waiting (the run checks again)."""
        for request in self.pending_approvals:
            if request.is_budget:
                request.status = ApprovalStatus.APPROVED
                request.decided_by, request.decided_at, request.comment = by, now, comment

    def forked(self, restarting: set[int]) -> None:
        """In a fork: what was decided before the fork's moment stays; what the restarting
        step asked, or what still waited, is asked again."""
        self._set(
            approvals=[
                a
                for a in self._s.approvals
                if a.step not in restarting and a.status is not ApprovalStatus.PENDING
            ],
            questions=[
                q
                for q in self._s.questions
                if q.step not in restarting and q.status is not QuestionStatus.PENDING
            ],
        )

    def trim(self, kept: int) -> None:
        """The latest `kept` closed requests of each kind, and every one still waiting."""
        self._set(
            approvals=latest(self._s.approvals, kept, lambda a: a.status is ApprovalStatus.PENDING),
            questions=latest(self._s.questions, kept, lambda q: q.status is QuestionStatus.PENDING),
        )


def latest(records: list[T], kept: int, still_open: Callable[[T], bool]) -> list[T]:
    """The records still open and the latest `kept` of the others, in their order."""
    closed = [i for i, record in enumerate(records) if not still_open(record)]
    dropped = set(closed[:-kept]) if kept else set(closed)
    return [record for i, record in enumerate(records) if i not in dropped]


def _named_or_only(pending: list[T], wanted: str | None, key: Callable[[T], str]) -> T | None:
    """The pending item a person named, or the only one pending when they named none."""
    if wanted is None:
        return pending[0] if len(pending) == 1 else None
    return next((item for item in pending if key(item) == wanted), None)
