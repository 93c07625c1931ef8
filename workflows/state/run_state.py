"""RunState: the run's state, its fields (fields.py) with the twelve records that own them.
It refuses any assignment to a field, naming the field's record, and hands each record out
anew on each use (a copy or a fork of the state never shares a record with its original)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import RunLimits, RunPolicy, RunRequest, Spend
from durable_agents.workflows.conversation_records import ConversationFields
from durable_agents.workflows.records import ApprovalRequest, Question
from durable_agents.workflows.state.audit_log import AuditLog
from durable_agents.workflows.state.budget_book import BudgetBook
from durable_agents.workflows.state.fields import StateFields
from durable_agents.workflows.state.lifecycle import Lifecycle
from durable_agents.workflows.state.moments import Moments
from durable_agents.workflows.state.origin import Origin
from durable_agents.workflows.state.outcomes import ToolOutcomes
from durable_agents.workflows.state.record import Record, StateWriteRefused
from durable_agents.workflows.state.requests import PeopleRequests
from durable_agents.workflows.state.signatures import Signatures
from durable_agents.workflows.state.steps import Steps
from durable_agents.workflows.state.terms import Terms
from durable_agents.workflows.state.thread import Thread
from durable_agents.workflows.state.transcript import Transcript

# Every field belongs to exactly one (tests/workflows/test_state_records.py).
RECORDS: tuple[type[Record], ...] = (
    Origin,
    Terms,
    Lifecycle,
    Steps,
    Transcript,
    ToolOutcomes,
    PeopleRequests,
    BudgetBook,
    Signatures,
    Moments,
    AuditLog,
    Thread,
)
OWNER_OF: dict[str, str] = {field: r.__name__ for r in RECORDS for field in r.OWNS}


class RunState(StateFields):
    # Written only by the deployment's own runs: a worker holding keys refuses one that
    # came in the clear (runtime/refused_payloads.py): a poller of our queue may answer a
    # query or complete a run, but cannot seal what it says.
    DEPLOYMENT_ONLY: ClassVar[bool] = True

    def __setattr__(self, name: str, value: Any) -> None:
        if name in OWNER_OF:
            raise StateWriteRefused(
                f"RunState.{name} is written by its record, {OWNER_OF[name]}: "
                "call one of its transitions"
            )
        super().__setattr__(name, value)

    @classmethod
    def start(cls, run_id: str, request: RunRequest, now: datetime) -> RunState:
        state = cls(
            run_id=run_id,
            goal=request.goal,
            label=request.label,
            policy=request.policy or RunPolicy(),
            limits=request.limits or RunLimits(),
            budget=request.budget,
            delegated_by=request.delegated_by,
            conversation=ConversationFields() if request.conversation else None,
            subject=request.subject,
            subject_grant=request.subject_grant,
            shadow=request.shadow,
            transcript_rows=0,
            created_at=now,
            updated_at=now,
        )
        state.audit_log.log(now, "system", "run_started", preview(request.goal))
        return state

    @property
    def origin(self) -> Origin:
        return Origin(self)

    @property
    def terms(self) -> Terms:
        return Terms(self)

    @property
    def lifecycle(self) -> Lifecycle:
        return Lifecycle(self)

    @property
    def steps(self) -> Steps:
        return Steps(self)

    @property
    def transcript(self) -> Transcript:
        return Transcript(self)

    @property
    def outcomes(self) -> ToolOutcomes:
        return ToolOutcomes(self)

    @property
    def requests(self) -> PeopleRequests:
        return PeopleRequests(self)

    @property
    def budget_book(self) -> BudgetBook:
        return BudgetBook(self)

    @property
    def signatures(self) -> Signatures:
        return Signatures(self)

    @property
    def moments(self) -> Moments:
        return Moments(self)

    @property
    def audit_log(self) -> AuditLog:
        return AuditLog(self)

    @property
    def thread(self) -> Thread:
        return Thread(self)

    # What readers ask most.
    @property
    def store_key(self) -> str:
        return self.origin.store_key

    @property
    def pending_approvals(self) -> list[ApprovalRequest]:
        return self.requests.pending_approvals

    @property
    def pending_questions(self) -> list[Question]:
        return self.requests.pending_questions

    @property
    def spent(self) -> Spend:
        return self.budget_book.spent
