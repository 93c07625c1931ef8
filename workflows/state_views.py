"""What a part of the run reads of the state: one view per record, the record's fields
read-only (its shape in state_shape.py) beside the record that writes them
(`state.requests`, ...). A part's view composes the views of the records it uses
(workflows/phases/context.py: `Phase[View]`); mypy refuses any other field, and at run
time the part is handed a share that answers only its view's names. RunState satisfies
every view by its fields and record properties."""

from __future__ import annotations

from typing import Protocol

from durable_agents.workflows.contracts import Spend
from durable_agents.workflows.records import ApprovalRequest, PlanStep, Question
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
from durable_agents.workflows.state_shape import (
    AuditFields,
    BudgetFields,
    LifecycleFields,
    MomentsFields,
    OriginFields,
    OutcomesFields,
    RequestsFields,
    SignaturesFields,
    StepsFields,
    TermsFields,
    ThreadFields,
    TranscriptFields,
)
from durable_agents.workflows.state_write import StateRecord


class OriginView(OriginFields, Protocol):
    """Who the run is and where it comes from."""

    @property
    def origin(self) -> Origin: ...

    @property
    def store_key(self) -> str: ...


class TermsView(TermsFields, Protocol):
    """What the run works on and under."""

    @property
    def terms(self) -> Terms: ...


class LifecycleView(LifecycleFields, Protocol):
    """Where the run is in its life."""

    @property
    def lifecycle(self) -> Lifecycle: ...

    @property
    def waiting_for(self) -> str: ...

    def progress_line(self) -> str: ...


class StepsView(StepsFields, Protocol):
    """The plan and the step the run is on."""

    @property
    def steps(self) -> Steps: ...

    @property
    def completed_steps(self) -> list[PlanStep]: ...


class TranscriptView(TranscriptFields, Protocol):
    """What the model is told, and where the transcript stands."""

    @property
    def transcript(self) -> Transcript: ...


class OutcomesView(OutcomesFields, Protocol):
    """What the run's tools returned and did."""

    @property
    def outcomes(self) -> ToolOutcomes: ...


class RequestsView(RequestsFields, Protocol):
    """What the run asks of people."""

    @property
    def requests(self) -> PeopleRequests: ...

    @property
    def pending_approvals(self) -> list[ApprovalRequest]: ...

    @property
    def pending_questions(self) -> list[Question]: ...


class BudgetView(BudgetFields, Protocol):
    """What the run may spend and has spent."""

    @property
    def budget_book(self) -> BudgetBook: ...

    @property
    def spent(self) -> Spend: ...


class SignaturesView(SignaturesFields, Protocol):
    """Which signatures count."""

    @property
    def signatures(self) -> Signatures: ...


class MomentsView(MomentsFields, Protocol):
    """The run's numbered moments."""

    @property
    def moments(self) -> Moments: ...


class AuditView(AuditFields, Protocol):
    """The run's audit log."""

    @property
    def audit_log(self) -> AuditLog: ...


class ThreadView(ThreadFields, Protocol):
    """A conversation's thread."""

    @property
    def thread(self) -> Thread: ...


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
    """What a view answers: the members of every record view it composes, and of the
    record's fields it reads (state_shape.py)."""
    return frozenset(
        name
        for base in view.__mro__
        if base in VIEWS.values() or base in SHAPES
        for name in vars(base)
        if not name.startswith("_")
    )


# The fields each view composes, by view.
SHAPES = {shape for view in VIEWS.values() for shape in view.__bases__ if shape is not Protocol}


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
