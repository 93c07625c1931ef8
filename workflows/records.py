"""The entries a run's state holds: its steps, approvals, questions, results, audit,
usage, delegations and timeline events, each a small pydantic model with its status.
(A "record" is one of the state's twelve owners of its fields, workflows/state/; these
are the data they keep. The module keeps its old name: every import uses it.)"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, Field, model_validator

from durable_agents.workflows.activity_io import TokenUsage
from durable_agents.workflows.contracts import Spend
from durable_agents.workflows.event_kinds import EventKind

T = TypeVar("T")
RECENT_RESULTS_KEPT = 20
# Between the workflow id and the first execution's run id in a run's identity; no run id
# we accept contains it (contracts.RUN_ID_PATTERN).
IDENTITY_SEPARATOR = "@"


def workflow_id_of(store_key: str) -> str:
    """The workflow id a run's store key belongs to (the key itself for older runs)."""
    return store_key.partition(IDENTITY_SEPARATOR)[0]


FINAL_ANSWER_CHARS = 4000


class RunStatus(StrEnum):
    PLANNING = "planning"
    RUNNING = "running"
    AWAITING_APPROVAL = "awaiting_approval"
    AWAITING_INPUT = "awaiting_input"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_closed(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


class StepStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"


class PlanStep(BaseModel):
    index: int
    title: str
    status: StepStatus = StepStatus.PENDING
    result: str | None = None
    turns: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None


class ApprovalStatus(StrEnum):
    """A request's status; a decided one is named as the moment it was decided at, so the
    two cannot drift apart (`moment`)."""

    PENDING = "pending"
    APPROVED = EventKind.APPROVED.value
    REJECTED = EventKind.REJECTED.value

    @property
    def moment(self) -> EventKind:
        """The kind of moment a request reached this status at (decided ones only)."""
        if self is ApprovalStatus.PENDING:
            raise ValueError("a pending request was not decided")
        return EventKind(self.value)


class RequestKind(StrEnum):
    """What an approval request asks a person: to let a tool call run, or to let the run
    go on past its budget (decided by raising the budget, or rejected to stop the run)."""

    TOOL = "tool"
    BUDGET = "budget"


class ApprovalRequest(BaseModel):
    request_id: str
    # A budget request's is BUDGET_REQUEST: the name its approvers are listed under in a
    # policy, and the one clients and states from before `kind` know it by.
    tool: str
    arguments: dict[str, Any]
    reason: str  # what the model said when it made the call
    step: int
    requested_at: datetime
    rule: str = ""  # why policy wants a human
    deadline: datetime | None = None
    escalated: bool = False
    status: ApprovalStatus = ApprovalStatus.PENDING
    decided_by: str | None = None
    decided_at: datetime | None = None
    comment: str = ""
    kind: RequestKind = RequestKind.TOOL

    @model_validator(mode="before")
    @classmethod
    def _kind_of_older_states(cls, data: Any) -> Any:
        """A state from before `kind` (carried over a continue-as-new, a fork's, a what-if
        report's) names its budget request by the tool name alone."""
        if isinstance(data, dict) and "kind" not in data and data.get("tool") == BUDGET_REQUEST:
            return {**data, "kind": RequestKind.BUDGET}
        return data

    @classmethod
    def for_budget(
        cls,
        request_id: str,
        call: str,
        reason: str,
        figures: dict[str, Any],
        step: int,
        now: datetime,
        deadline: datetime,
    ) -> ApprovalRequest:
        """The request a run makes when its next `call` would pass its budget (`reason`),
        with what it has spent and may spend (`figures`)."""
        return cls(
            request_id=request_id,
            kind=RequestKind.BUDGET,
            tool=BUDGET_REQUEST,
            arguments=figures,
            reason=f"the next {call} call would pass the budget: {reason}",
            rule=f"budget: {reason}; raise it or stop the run",
            step=step,
            requested_at=now,
            deadline=deadline,
        )

    @property
    def is_budget(self) -> bool:
        """By kind, or by the name no tool can have (a state that says otherwise is no
        reason to let a budget request be approved like a tool call)."""
        return self.kind is RequestKind.BUDGET or self.tool == BUDGET_REQUEST


class QuestionStatus(StrEnum):
    PENDING = "pending"
    ANSWERED = "answered"
    EXPIRED = "expired"


class Question(BaseModel):
    question_id: str
    question: str
    options: list[str] | None = None
    step: int
    asked_at: datetime
    deadline: datetime | None = None
    status: QuestionStatus = QuestionStatus.PENDING
    answer: str | None = None
    answered_by: str | None = None
    answered_at: datetime | None = None


class AuditEntry(BaseModel):
    at: datetime
    actor: str
    action: str
    detail: str = ""


class ToolResultRecord(BaseModel):
    step: int
    tool_call_id: str
    tool: str
    ok: bool
    summary: str
    seq: int


class Usage(BaseModel):
    model_calls: int = 0
    memoized_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, usage: TokenUsage, *, memoized: bool) -> None:
        self.model_calls += 1
        if memoized:
            self.memoized_calls += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cost_usd = round(self.cost_usd + usage.cost_usd, 6)


# The name a budget request goes by (RequestKind.BUDGET): no tool has parentheses in its
# name, so a policy's approvers for it never meet a tool's.
BUDGET_REQUEST = "(budget)"
DELEGATE_ANSWER_CHARS = 2000


class Delegation(BaseModel):
    """A task the run handed to a sub-agent, run as a child workflow."""

    child_id: str
    agent: str
    tool: str
    step: int
    tool_call_id: str
    task: str
    status: str = "running"  # running, completed, failed, cancelled
    spent: Spend = Field(default_factory=Spend)
    answer: str | None = None
    started_at: datetime | None = None
    # Made by the run this one was forked from: its answer is reused for the same task.
    inherited: bool = False
    # The child's spend reports must carry it (None: a delegation from before tokens, or
    # one whose child's spend is read from the child's own record: `spend_read`).
    report_token: str | None = None
    # The child's spend is read from its own run; its reports only say when to read it
    # (patches.CHILD_SPEND_READ). False: the spend a report carries, with the token.
    spend_read: bool = False
    # The child reported since its spend was last read.
    spend_reported: bool = False


class RunEvent(BaseModel):
    """One moment of the run as the event protocol carries it (docs/events.md): its offset
    is the moment's number, which never repeats within a run's chain."""

    offset: int
    at: datetime
    kind: str
    detail: str = ""
    status: RunStatus
    step: int | None = None
    # The transcript entry this moment writes (a model reply, a tool result), if any.
    seq: int | None = None


# The most recent events a run keeps in its state; older ones are read from its history.
EVENTS_KEPT = 100


class SignedUse(BaseModel):
    """A signed change a run counted: its nonce, and when it was signed."""

    nonce: str
    at: datetime


class ForkOrigin(BaseModel):
    run_id: str
    moment: int
