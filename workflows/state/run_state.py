"""RunState: the run's state, one flat pydantic model (its fields in fields.py), made of
twelve records, each the only writer of its fields (one file each here). It refuses any
assignment to a field, naming the field's record; it hands each record out on each use
(a copy or a fork of the state never shares a record with its original), and says once
what readers (queries, the console, the CLI) ask most."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import RunLimits, RunPolicy, RunRequest, Spend
from durable_agents.workflows.conversation_records import ConversationFields
from durable_agents.workflows.records import ApprovalRequest, PlanStep, Question, RunStatus
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

# The records the state is made of; every field belongs to exactly one
# (tests/workflows/test_state_records.py holds that).
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
    """The run's state, the source of truth: read anywhere, written by its records."""

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

    # What readers ask most, said once here.
    @property
    def store_key(self) -> str:
        """The key of this run's rows in our stores, and the root of its idempotency keys."""
        return self.origin.store_key

    @property
    def pending_approvals(self) -> list[ApprovalRequest]:
        return self.requests.pending_approvals

    @property
    def pending_questions(self) -> list[Question]:
        return self.requests.pending_questions

    @property
    def completed_steps(self) -> list[PlanStep]:
        return self.steps.completed

    @property
    def spent(self) -> Spend:
        """What the run and every sub-agent it delegated to have spent."""
        return self.budget_book.spent

    @property
    def waiting_for(self) -> str:
        """What a human must do for the run to go on ('' when nothing)."""
        return {
            RunStatus.AWAITING_APPROVAL: "approval",
            RunStatus.AWAITING_INPUT: "input",
            RunStatus.PAUSED: "resume",
        }.get(self.status, "")

    def progress_line(self) -> str:
        """One line for the Web UI's current details and the CLI."""
        total = len(self.plan)
        if self.status is RunStatus.PLANNING:
            return "planning"
        convo = self.conversation
        if convo is not None and (self.status.is_closed or self.status is RunStatus.RUNNING):
            turns = f"conversation, {convo.turns_total} turns"
            if self.status.is_closed:
                return f"{self.status.value} ({turns})"
            if self.current_step is not None:
                return f"{turns} — answering turn {self.current_step}, {len(convo.queue)} queued"
            return f"{turns} — waiting for a message" if not convo.closed else f"{turns} — closing"
        if self.status.is_closed:
            return f"{self.status.value} ({len(self.completed_steps)}/{total} steps done)"
        step = next((s for s in self.plan if s.index == self.current_step), None)
        where = f"step {step.index}/{total}: {step.title}" if step else f"{total} steps"
        if self.status is RunStatus.AWAITING_APPROVAL:
            tools = ", ".join(a.tool for a in self.pending_approvals)
            return f"{where} — awaiting approval ({tools})"
        if self.status is RunStatus.AWAITING_INPUT:
            asked = "; ".join(preview(q.question, 60) for q in self.pending_questions)
            return f"{where} — awaiting an answer: {asked}"
        running = next((d for d in self.delegations if d.status == "running"), None)
        if running is not None and self.status is RunStatus.RUNNING:
            return f"{where} — waiting for sub-agent {running.agent} ({running.child_id})"
        return f"{where} — {self.status.value}"
