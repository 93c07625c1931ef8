"""The run's state as its records see it: every field of RunState (workflows/
state_fields.py), by type alone, read-only, grouped by the record that owns it
(`TermsFields` is what `Terms` owns: its OWNS is derived from it, and its view in
state_views.py composes it). The records (state_records.py, state_lifecycle.py,
state_decisions.py, state_budget.py) are typed by this, not by RunState, which composes
them: so the state's modules import one another in one direction only (tests/
test_layering.py), and mypy checks RunState against it wherever a record is made."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from durable_agents.workflows.activity_io import ChatMessage
from durable_agents.workflows.agent_records import AgentRecord
from durable_agents.workflows.contracts import (
    DelegatedBy,
    EffectsReport,
    RunBudget,
    RunLimits,
    RunPolicy,
    Spend,
)
from durable_agents.workflows.conversation_records import ConversationFields
from durable_agents.workflows.people_inputs import SignedDecision
from durable_agents.workflows.records import (
    ApprovalRequest,
    ApprovalStatus,
    AuditEntry,
    Delegation,
    ForkOrigin,
    PlanStep,
    Question,
    QuestionStatus,
    RunEvent,
    RunStatus,
    SignedUse,
    ToolResultRecord,
    Usage,
)
from durable_agents.workflows.whatif import ShadowSpec


class OriginFields(Protocol):
    """Who the run is and where it comes from. (Origin's fields.)"""

    @property
    def run_id(self) -> str: ...

    @property
    def identity(self) -> str | None: ...

    @property
    def parent(self) -> ForkOrigin | None: ...

    @property
    def chain(self) -> int: ...

    @property
    def delegated_by(self) -> DelegatedBy | None: ...

    @property
    def shadow(self) -> ShadowSpec | None: ...

    @property
    def created_at(self) -> datetime: ...


class TermsFields(Protocol):
    """What the run works on and under. (Terms's fields.)"""

    @property
    def goal(self) -> str: ...

    @property
    def label(self) -> str | None: ...

    @property
    def agent(self) -> AgentRecord | None: ...

    @property
    def policy(self) -> RunPolicy: ...

    @property
    def limits(self) -> RunLimits: ...

    @property
    def subject(self) -> dict[str, str] | None: ...

    @property
    def subject_grant(self) -> SignedDecision | None: ...

    @property
    def memory_namespace(self) -> str | None: ...


class LifecycleFields(Protocol):
    """Where the run is in its life. (Lifecycle's fields.)"""

    @property
    def status(self) -> RunStatus: ...

    @property
    def pause_requested(self) -> bool: ...

    @property
    def cancel_requested_by(self) -> str | None: ...

    @property
    def errors(self) -> list[str]: ...

    @property
    def final_answer(self) -> str | None: ...

    @property
    def output(self) -> dict[str, Any] | None: ...


class StepsFields(Protocol):
    """The plan and the step the run is on. (Steps's fields.)"""

    @property
    def plan(self) -> list[PlanStep]: ...

    @property
    def current_step(self) -> int | None: ...

    @property
    def context(self) -> list[str]: ...


class TranscriptFields(Protocol):
    """Where the transcript stands, and what the model is told next. (Transcript's fields.)"""

    @property
    def next_seq(self) -> int: ...

    @property
    def outbox(self) -> list[ChatMessage]: ...

    @property
    def transcript_rows(self) -> int | None: ...

    @property
    def store_queue(self) -> str | None: ...

    @property
    def notes_for_model(self) -> list[str]: ...

    @property
    def phase_start_seq(self) -> int: ...


class OutcomesFields(Protocol):
    """What the run's tools returned and did. (ToolOutcomes's fields.)"""

    @property
    def results(self) -> list[ToolResultRecord]: ...

    @property
    def results_total(self) -> int: ...

    @property
    def effects(self) -> EffectsReport: ...


class RequestsFields(Protocol):
    """What the run asks of people. (PeopleRequests's fields.)"""

    @property
    def approvals(self) -> list[ApprovalRequest]: ...

    @property
    def questions(self) -> list[Question]: ...


class BudgetFields(Protocol):
    """What the run may spend and has spent. (BudgetBook's fields.)"""

    @property
    def usage(self) -> Usage: ...

    @property
    def budget(self) -> RunBudget | None: ...

    @property
    def tool_calls(self) -> int: ...

    @property
    def last_call(self) -> Spend | None: ...

    @property
    def delegations(self) -> list[Delegation]: ...


class SignaturesFields(Protocol):
    """Which signatures count, and which were used. (Signatures's fields.)"""

    @property
    def signature_version(self) -> int: ...

    @property
    def signed_nonces(self) -> list[SignedUse]: ...

    @property
    def people_checks(self) -> int: ...

    @property
    def revoked_keys(self) -> list[str]: ...


class MomentsFields(Protocol):
    """The run's numbered moments. (Moments's fields.)"""

    @property
    def moment(self) -> int: ...

    @property
    def events(self) -> list[RunEvent]: ...


class AuditFields(Protocol):
    """The run's audit log. (AuditLog's fields.)"""

    @property
    def audit(self) -> list[AuditEntry]: ...

    @property
    def updated_at(self) -> datetime: ...


class ThreadFields(Protocol):
    """A conversation's thread. (Thread's fields.)"""

    @property
    def conversation(self) -> ConversationFields | None: ...


class StateShape(
    OriginFields,
    TermsFields,
    LifecycleFields,
    StepsFields,
    TranscriptFields,
    OutcomesFields,
    RequestsFields,
    BudgetFields,
    SignaturesFields,
    MomentsFields,
    AuditFields,
    ThreadFields,
    Protocol,
):
    """Every field of the run's state, read-only: what the records read and mypy checks
    RunState against."""


def fields_of(shape: type) -> frozenset[str]:
    """The fields a record's shape names (a record's OWNS is its shape's fields)."""
    return frozenset(name for name, member in vars(shape).items() if isinstance(member, property))


def pending_approvals(state: StateShape) -> list[ApprovalRequest]:
    """The approvals still waiting for a decision (the requests' record and the lifecycle
    both ask)."""
    return [a for a in state.approvals if a.status is ApprovalStatus.PENDING]


def pending_questions(state: StateShape) -> list[Question]:
    """The questions still waiting for an answer."""
    return [q for q in state.questions if q.status is QuestionStatus.PENDING]
