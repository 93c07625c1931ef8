"""What a part of the run reads of the state: one view per record, its fields read-only
beside the record that writes them (`state.requests`, ...). A part's view composes the
views of the records it uses (workflows/phases/context.py: `Phase[View]`); mypy refuses
any other field, and at run time the part is handed a share that answers only its view's
names. RunState satisfies every view by its fields and record properties."""

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
    AuditEntry,
    Delegation,
    ForkOrigin,
    PlanStep,
    Question,
    RunEvent,
    RunStatus,
    SignedUse,
    ToolResultRecord,
    Usage,
)
from durable_agents.workflows.state_budget import BudgetBook
from durable_agents.workflows.state_decisions import PeopleRequests
from durable_agents.workflows.state_lifecycle import Lifecycle, Steps, ToolOutcomes, Transcript
from durable_agents.workflows.state_records import (
    AuditLog,
    Moments,
    Origin,
    Signatures,
    Terms,
    Thread,
)
from durable_agents.workflows.state_write import StateRecord
from durable_agents.workflows.whatif import ShadowSpec


class OriginView(Protocol):
    """Who the run is and where it comes from."""

    @property
    def origin(self) -> Origin: ...

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

    @property
    def store_key(self) -> str: ...


class TermsView(Protocol):
    """What the run works on and under."""

    @property
    def terms(self) -> Terms: ...

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


class LifecycleView(Protocol):
    """Where the run is in its life."""

    @property
    def lifecycle(self) -> Lifecycle: ...

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

    @property
    def waiting_for(self) -> str: ...

    def progress_line(self) -> str: ...


class StepsView(Protocol):
    """The plan and the step the run is on."""

    @property
    def steps(self) -> Steps: ...

    @property
    def plan(self) -> list[PlanStep]: ...

    @property
    def current_step(self) -> int | None: ...

    @property
    def context(self) -> list[str]: ...

    @property
    def completed_steps(self) -> list[PlanStep]: ...


class TranscriptView(Protocol):
    """What the model is told, and where the transcript stands."""

    @property
    def transcript(self) -> Transcript: ...

    @property
    def next_seq(self) -> int: ...

    @property
    def outbox(self) -> list[ChatMessage]: ...

    @property
    def transcript_rows(self) -> int | None: ...

    @property
    def notes_for_model(self) -> list[str]: ...

    @property
    def phase_start_seq(self) -> int: ...


class OutcomesView(Protocol):
    """What the run's tools returned and did."""

    @property
    def outcomes(self) -> ToolOutcomes: ...

    @property
    def results(self) -> list[ToolResultRecord]: ...

    @property
    def results_total(self) -> int: ...

    @property
    def effects(self) -> EffectsReport: ...


class RequestsView(Protocol):
    """What the run asks of people."""

    @property
    def requests(self) -> PeopleRequests: ...

    @property
    def approvals(self) -> list[ApprovalRequest]: ...

    @property
    def questions(self) -> list[Question]: ...

    @property
    def pending_approvals(self) -> list[ApprovalRequest]: ...

    @property
    def pending_questions(self) -> list[Question]: ...


class BudgetView(Protocol):
    """What the run may spend and has spent."""

    @property
    def budget_book(self) -> BudgetBook: ...

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

    @property
    def spent(self) -> Spend: ...


class SignaturesView(Protocol):
    """Which signatures count."""

    @property
    def signatures(self) -> Signatures: ...

    @property
    def signature_version(self) -> int: ...

    @property
    def signed_nonces(self) -> list[SignedUse]: ...

    @property
    def people_checks(self) -> int: ...

    @property
    def revoked_keys(self) -> list[str]: ...


class MomentsView(Protocol):
    """The run's numbered moments."""

    @property
    def moments(self) -> Moments: ...

    @property
    def moment(self) -> int: ...

    @property
    def events(self) -> list[RunEvent]: ...


class AuditView(Protocol):
    """The run's audit log."""

    @property
    def audit_log(self) -> AuditLog: ...

    @property
    def audit(self) -> list[AuditEntry]: ...

    @property
    def updated_at(self) -> datetime: ...


class ThreadView(Protocol):
    """A conversation's thread."""

    @property
    def thread(self) -> Thread: ...

    @property
    def conversation(self) -> ConversationFields | None: ...


# Each record's view, by the record it reads (tests/workflows/test_phase_parts.py).
VIEWS: dict[type[StateRecord], type] = {
    Origin: OriginView,
    Terms: TermsView,
    Lifecycle: LifecycleView,
    Steps: StepsView,
    Transcript: TranscriptView,
    ToolOutcomes: OutcomesView,
    PeopleRequests: RequestsView,
    BudgetBook: BudgetView,
    Signatures: SignaturesView,
    Moments: MomentsView,
    AuditLog: AuditView,
    Thread: ThreadView,
}


def names_of(view: type) -> frozenset[str]:
    """What a view answers: the members of every record view it composes."""
    return frozenset(
        name
        for base in view.__mro__
        if base in VIEWS.values()
        for name in vars(base)
        if not name.startswith("_")
    )


def records_of(view: type) -> frozenset[str]:
    """The records a view hands out, by the state's name for each (`requests`, ...)."""
    return frozenset(
        name
        for base in view.__mro__
        if base in VIEWS.values()
        for name, member in vars(base).items()
        if isinstance(member, property)
        and member.fget is not None
        and member.fget.__annotations__.get("return") in {r.__name__ for r in VIEWS}
    )
