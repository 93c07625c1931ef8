"""What queries answer about a run, read from its state: `RunSummary`, the `events`
query's `EventPage`, and the state as a query hands it out (`for_readers`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel, Field

from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import DelegatedBy, RunBudget, Spend
from durable_agents.workflows.records import (
    ApprovalRequest,
    Delegation,
    ForkOrigin,
    Question,
    RunEvent,
    RunStatus,
    Usage,
)

if TYPE_CHECKING:  # the state re-exports this module's names: no import back at load time
    from durable_agents.workflows.state.run_state import RunState


class RunSummary(BaseModel):
    # Written only by the deployment's own runs: a worker holding keys refuses one that
    # came in the clear (runtime/refused_payloads.py): a poller of our queue may answer a
    # query or complete a run, but cannot seal what it says.
    DEPLOYMENT_ONLY: ClassVar[bool] = True

    run_id: str
    goal: str
    status: RunStatus
    progress: str
    steps_total: int
    steps_done: int
    current_step: int | None
    waiting_for: str
    pending_approvals: list[ApprovalRequest]
    pending_questions: list[Question]
    usage: Usage
    final_answer: str | None
    errors: list[str]
    output: dict[str, Any] | None = None
    parent: ForkOrigin | None = None
    agent: str | None = None
    label: str | None = None
    moment: int = 0
    budget: RunBudget | None = None
    spent: Spend | None = None
    delegated_by: DelegatedBy | None = None
    delegations: list[Delegation] = Field(default_factory=list)

    @classmethod
    def of(cls, state: RunState) -> RunSummary:
        return cls(
            run_id=state.run_id,
            agent=state.agent.name if state.agent else None,
            label=state.label,
            moment=state.moment,
            goal=state.goal,
            status=state.status,
            progress=progress_line(state),
            steps_total=len(state.plan),
            steps_done=len(state.steps.completed),
            current_step=state.current_step,
            waiting_for=waiting_for(state),
            pending_approvals=state.pending_approvals,
            pending_questions=state.pending_questions,
            usage=state.usage,
            final_answer=state.final_answer,
            output=state.output,
            errors=state.errors,
            parent=state.parent,
            budget=state.budget,
            spent=state.spent,
            delegated_by=hide_token(state.delegated_by) if state.delegated_by else None,
            delegations=[hide_token(d) for d in state.delegations],
        )


class EventPage(BaseModel):
    """The answer of the `events` query: the events after an offset, and where the run is."""

    summary: RunSummary
    store_key: str  # where the run's transcript texts are (the previews' source)
    first_kept: int | None  # the oldest offset still held in the state (None: none yet)
    events: list[RunEvent]


def event_page(state: RunState, after: int) -> EventPage:
    return EventPage(
        summary=RunSummary.of(state),
        store_key=state.store_key,
        first_kept=state.events[0].offset if state.events else None,
        events=[e for e in state.events if e.offset > after],
    )


def for_readers(state: RunState) -> RunState:
    """The state as a query hands it out: without the spend reports' tokens (a parent
    checks a child's report by it; whoever read it could report for the child). A shallow
    copy: the rest is shared, read-only, with the run."""
    update: dict[str, Any] = {"delegations": [hide_token(d) for d in state.delegations]}
    if state.delegated_by is not None:
        update["delegated_by"] = hide_token(state.delegated_by)
    return state.model_copy(update=update)


TokenHolder = TypeVar("TokenHolder", Delegation, DelegatedBy)


def hide_token(held: TokenHolder) -> TokenHolder:
    """A delegation (or a child's link to its parent) without its spend-report token."""
    return held if held.report_token is None else held.model_copy(update={"report_token": None})


def waiting_for(state: RunState) -> str:
    """What a human must do for the run to go on ('' when nothing)."""
    return {
        RunStatus.AWAITING_APPROVAL: "approval",
        RunStatus.AWAITING_INPUT: "input",
        RunStatus.PAUSED: "resume",
    }.get(state.status, "")


def progress_line(state: RunState) -> str:
    """One line for the Web UI's current details and the CLI."""
    total, status, convo = len(state.plan), state.status, state.conversation
    if status is RunStatus.PLANNING:
        return "planning"
    if convo is not None and (status.is_closed or status is RunStatus.RUNNING):
        turns = f"conversation, {convo.turns_total} turns"
        if status.is_closed:
            return f"{status.value} ({turns})"
        if state.current_step is not None:
            return f"{turns} — answering turn {state.current_step}, {len(convo.queue)} queued"
        return f"{turns} — waiting for a message" if not convo.closed else f"{turns} — closing"
    if status.is_closed:
        return f"{status.value} ({len(state.steps.completed)}/{total} steps done)"
    step = next((s for s in state.plan if s.index == state.current_step), None)
    where = f"step {step.index}/{total}: {step.title}" if step else f"{total} steps"
    if status is RunStatus.AWAITING_APPROVAL:
        tools = ", ".join(a.tool for a in state.pending_approvals)
        return f"{where} — awaiting approval ({tools})"
    if status is RunStatus.AWAITING_INPUT:
        asked = "; ".join(preview(q.question, 60) for q in state.pending_questions)
        return f"{where} — awaiting an answer: {asked}"
    running = next((d for d in state.delegations if d.status == "running"), None)
    if running is not None and status is RunStatus.RUNNING:
        return f"{where} — waiting for sub-agent {running.agent} ({running.child_id})"
    return f"{where} — {status.value}"
