"""The run's state: one pydantic model, the source of truth, owning its transitions.

Handlers and the workflow loop stay thin: every change goes through a method here,
so the lifecycle rules live in one place.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import AliasChoices, BaseModel, Field

from workflows.agents import AgentRecord
from workflows.contracts import (
    EFFECTS_LISTED,
    Actor,
    Answer,
    BudgetRaise,
    ChatMessage,
    Decision,
    DelegatedBy,
    EffectsReport,
    EffectSummary,
    RunBudget,
    RunLimits,
    RunPolicy,
    RunRequest,
    Spend,
    StatePatch,
    TokenUsage,
    preview,
)

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
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class ApprovalRequest(BaseModel):
    request_id: str
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


# The approval a run asks for when its budget is spent: not a tool (no tool has parentheses
# in its name), decided by raising the budget or stopping the run.
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
    # The child's spend reports must carry it (None: a delegation from before tokens).
    report_token: str | None = None


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


class EventPage(BaseModel):
    """The answer of the `events` query: the events after an offset, and where the run is."""

    summary: RunSummary
    store_key: str  # where the run's transcript texts are (the previews' source)
    first_kept: int | None  # the oldest offset still held in the state (None: none yet)
    events: list[RunEvent]


class SignedUse(BaseModel):
    """A signed change a run counted: its nonce, and when it was signed."""

    nonce: str
    at: datetime


class ForkOrigin(BaseModel):
    run_id: str
    moment: int


class RunState(BaseModel):
    run_id: str  # the workflow id: what people name the run by
    # The run's identity across its chain (agent.run_identity), under which its transcript,
    # model memo and ledger rows are stored. None in runs started before it existed: their
    # data stays under the workflow id.
    identity: str | None = None
    goal: str
    # The run's free label (contracts.RunRequest.label); `scenario` in earlier versions.
    label: str | None = Field(default=None, validation_alias=AliasChoices("label", "scenario"))
    # The agent resolved when the run started (None in runs from before agents existed).
    agent: AgentRecord | None = None
    policy: RunPolicy = Field(default_factory=RunPolicy)
    limits: RunLimits = Field(default_factory=RunLimits)
    status: RunStatus = RunStatus.PLANNING
    plan: list[PlanStep] = Field(default_factory=list)
    current_step: int | None = None
    context: list[str] = Field(default_factory=list)
    results: list[ToolResultRecord] = Field(default_factory=list)
    results_total: int = 0
    approvals: list[ApprovalRequest] = Field(default_factory=list)
    questions: list[Question] = Field(default_factory=list)
    pause_requested: bool = False
    cancel_requested_by: str | None = None
    audit: list[AuditEntry] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    errors: list[str] = Field(default_factory=list)
    final_answer: str | None = None
    # The side effects this run performed: each tool call's result as the effect ledger
    # recorded it under its idempotency key (the most recent, and how many in all).
    effects: EffectsReport = Field(default_factory=EffectsReport)
    next_seq: int = 0
    outbox: list[ChatMessage] = Field(default_factory=list)
    # Things people did (edits) that the model must hear about on its next turn.
    notes_for_model: list[str] = Field(default_factory=list)
    # Numbered points of the run's timeline (workflows/timeline.py); the last one reached.
    moment: int = 0
    # The latest moments, for the event protocol (at most EVENTS_KEPT).
    events: list[RunEvent] = Field(default_factory=list)
    # Where the current phase (plan, a step, the final answer) began in the transcript.
    phase_start_seq: int = 0
    parent: ForkOrigin | None = None
    chain: int = 1  # runs in the continue-as-new chain so far, this one included
    # What the run (with its sub-agents) may spend; None: no limit.
    budget: RunBudget | None = None
    tool_calls: int = 0  # tool calls this run made (its delegations included)
    # What the latest model call cost (shown to the person raising a budget).
    last_call: Spend | None = None
    delegations: list[Delegation] = Field(default_factory=list)
    delegated_by: DelegatedBy | None = None
    # The signature version this run takes when its policy requires signed changes
    # (workflows/signing.py; 1 in runs from before the `every-change-signed` patch), and
    # the nonces of the signed changes it counted within signing.FRESH_FOR.
    signature_version: int = 1
    signed_nonces: list[SignedUse] = Field(default_factory=list)
    created_at: datetime
    updated_at: datetime

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
            created_at=now,
            updated_at=now,
        )
        state.log(now, "system", "run_started", preview(request.goal))
        return state

    @property
    def store_key(self) -> str:
        """The key of this run's rows in our stores, and the root of its idempotency keys."""
        return self.identity or self.run_id

    # -- transcript bookkeeping ------------------------------------------------
    def queue_message(self, role: str, content: str, tool_call_id: str | None = None) -> None:
        """Queue a small message; the next model call writes it to the transcript."""
        message = ChatMessage.model_validate(
            {"seq": self.take_seq(), "role": role, "content": content, "tool_call_id": tool_call_id}
        )
        self.outbox.append(message)

    def take_seq(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def flush_notes(self) -> None:
        """Queue what people did for the model. Called before a new instruction, and before a
        model call, after every tool result: tool messages stay right behind the assistant
        message that called them."""
        for note in self.notes_for_model:
            self.queue_message("user", note)
        self.notes_for_model = []

    def drain_outbox(self) -> list[ChatMessage]:
        """Messages for the next model call."""
        self.flush_notes()
        messages, self.outbox = self.outbox, []
        return messages

    # -- plan and steps -----------------------------------------------------------
    @property
    def completed_steps(self) -> list[PlanStep]:
        return [s for s in self.plan if s.status is StepStatus.DONE]

    def set_plan(self, titles: list[str], now: datetime) -> None:
        self.plan = [PlanStep(index=i, title=t) for i, t in enumerate(titles, start=1)]
        self.status = RunStatus.RUNNING
        self.log(now, "model", "plan_set", f"{len(titles)} steps")

    def next_step(self) -> PlanStep | None:
        return next((s for s in self.plan if s.status is not StepStatus.DONE), None)

    def start_step(self, step: PlanStep, now: datetime) -> None:
        step.status = StepStatus.RUNNING
        step.started_at = step.started_at or now
        self.current_step = step.index
        self.updated_at = now

    def complete_step(self, step: PlanStep, result: str, now: datetime) -> None:
        step.status = StepStatus.DONE
        step.result = preview(result)
        step.finished_at = now
        self.current_step = None
        self.context.append(f"step {step.index}: {preview(result, 120)}")
        self.context = self.context[-RECENT_RESULTS_KEPT:]
        self.updated_at = now

    def record_tool_result(self, record: ToolResultRecord, now: datetime) -> None:
        self.results.append(record)
        self.results = self.results[-RECENT_RESULTS_KEPT:]
        self.results_total += 1
        self.updated_at = now

    def record_effect(self, effect: EffectSummary) -> None:
        self.effects.total += 1
        self.effects.recent = [*self.effects.recent, effect][-EFFECTS_LISTED:]

    def record_usage(self, usage: TokenUsage, *, memoized: bool) -> None:
        self.usage.add(usage, memoized=memoized)
        if not memoized:
            tokens = usage.input_tokens + usage.output_tokens
            self.last_call = Spend(usd=usage.cost_usd, tokens=tokens)

    # -- budget: the run and its sub-agents together ------------------------------
    @property
    def own_spend(self) -> Spend:
        tokens = self.usage.input_tokens + self.usage.output_tokens
        return Spend(usd=self.usage.cost_usd, tokens=tokens, tool_calls=self.tool_calls)

    @property
    def spent(self) -> Spend:
        """What the run and every sub-agent it delegated to have spent."""
        total = self.own_spend
        for delegation in self.delegations:
            total = total.plus(delegation.spent)
        return total

    def elapsed(self, now: datetime) -> float:
        return max(0.0, (now - self.created_at).total_seconds())

    def budget_error(self, call: str, now: datetime) -> str | None:
        """Why the next call (`model`, `tool` or `delegate`) would pass the budget."""
        budget = self.budget
        if budget is None:
            return None
        spent = self.spent
        if budget.seconds is not None and self.elapsed(now) >= budget.seconds:
            return f"its time ({budget.seconds:g} s) is up"
        calls = budget.tool_calls
        if call != "model" and calls is not None and spent.tool_calls + 1 > calls:
            return f"{spent.tool_calls} of {calls} tool calls are made"
        if call == "tool":
            return None
        # Spent to the limit: no call. Below it, the model activity estimates whether the
        # call itself would pass it (it knows the request's size).
        if budget.usd is not None and spent.usd >= budget.usd:
            return f"${spent.usd:.4f} of ${budget.usd:.4f} is spent"
        if budget.tokens is not None and spent.tokens >= budget.tokens:
            return f"{spent.tokens} of {budget.tokens} tokens are spent"
        return None

    def call_budget(self) -> dict[str, Any]:
        """What a model call may spend: the rest of the budget (the model activity's check)."""
        budget = self.budget
        if budget is None or (budget.usd is None and budget.tokens is None):
            return {}
        spent = self.spent
        return {
            "budget_usd": None if budget.usd is None else round(budget.usd - spent.usd, 6),
            "budget_tokens": None if budget.tokens is None else budget.tokens - spent.tokens,
        }

    def budget_figures(self, now: datetime) -> dict[str, Any]:
        """What a person deciding on a budget sees."""
        assert self.budget is not None
        return {
            "budget": self.budget.model_dump(exclude_none=True),
            "spent": self.spent.model_dump(),
            "seconds": round(self.elapsed(now), 1),
            "next_call": (self.last_call or Spend()).model_dump(include={"usd", "tokens"}),
        }

    def remaining_budget(self, now: datetime, child: Delegation) -> RunBudget | None:
        """What a sub-agent may spend: this run's budget less what the run and its other
        sub-agents spent (and, for time, the time that had passed when the child began)."""
        if self.budget is None:
            return None
        budget = self.budget
        spent = Spend.model_validate(
            {
                "usd": round(self.spent.usd - child.spent.usd, 6),
                "tokens": self.spent.tokens - child.spent.tokens,
                "tool_calls": self.spent.tool_calls - child.spent.tool_calls,
            }
        )
        began = child.started_at or now
        return RunBudget(
            usd=None if budget.usd is None else max(0.0, round(budget.usd - spent.usd, 6)),
            tokens=None if budget.tokens is None else max(0, budget.tokens - spent.tokens),
            tool_calls=None
            if budget.tool_calls is None
            else max(0, budget.tool_calls - spent.tool_calls),
            seconds=None
            if budget.seconds is None
            else max(0.001, budget.seconds - self.elapsed(began)),
        )

    def budget_raise_error(self, raise_: BudgetRaise, now: datetime) -> str | None:
        if self.status.is_closed:
            return f"the run is {self.status.value}"
        limits = raise_.limits()
        if not limits:
            return "give a new limit: usd, tokens, tool_calls or seconds"
        if not self.policy.may_decide(BUDGET_REQUEST, raise_.by):
            return f"{raise_.by} may not change this run's budget"
        spent = self.spent
        below = {
            "usd": spent.usd,
            "tokens": spent.tokens,
            "tool_calls": spent.tool_calls,
            "seconds": self.elapsed(now),
        }
        for name, value in limits.items():
            if value < below[name]:
                return f"{name} {value:g} is below what is spent already ({below[name]:g})"
        return None

    def raise_budget(self, raise_: BudgetRaise, now: datetime) -> RunBudget:
        """Apply a raise that budget_raise_error() accepted; a budget request waiting is
        approved by it (the run checks again, and asks again if still over)."""
        base = self.budget.model_dump() if self.budget else {}
        self.budget = RunBudget.model_validate(base | raise_.limits())
        detail = json.dumps(raise_.limits(), sort_keys=True)
        for request in self.pending_approvals:
            if request.tool == BUDGET_REQUEST:
                request.status = ApprovalStatus.APPROVED
                request.decided_by, request.decided_at = raise_.by, now
                request.comment = raise_.comment or f"budget raised: {detail}"
        self._leave_wait()
        self.log(now, raise_.by, "budget_raised", detail)
        return self.budget

    # -- delegation -----------------------------------------------------------------
    def delegation(self, child_id: str) -> Delegation | None:
        return next((d for d in self.delegations if d.child_id == child_id), None)

    def reusable_delegation(self, agent: str, step: int, task: str) -> Delegation | None:
        """A finished delegation of the run this one was forked from, for the same task."""
        return next(
            (
                d
                for d in self.delegations
                if d.inherited
                and d.status == "completed"
                and (d.agent, d.step, d.task) == (agent, step, preview(task, 500))
            ),
            None,
        )

    def start_delegation(self, delegation: Delegation, now: datetime) -> None:
        self.delegations.append(delegation)
        self.tool_calls += 1
        self.log(now, "model", "delegated", f"{delegation.agent}: {delegation.child_id}")

    def child_spent(self, child_id: str, spent: Spend, token: str | None = None) -> bool:
        """A running child's spend so far (it reports after each call); False if unknown,
        or not carrying the token the child was given (a report anyone else sent)."""
        delegation = self.delegation(child_id)
        if delegation is None or delegation.status != "running":
            return False
        if delegation.report_token is not None and token != delegation.report_token:
            return False
        known = delegation.spent
        if (
            spent.usd < known.usd
            or spent.tokens < known.tokens
            or spent.tool_calls < known.tool_calls
        ):
            return False  # spend only grows: an older (or forged) report changes nothing
        delegation.spent = spent
        return True

    def finish_delegation(
        self, child_id: str, status: str, answer: str | None, spent: Spend | None, now: datetime
    ) -> None:
        delegation = self.delegation(child_id)
        assert delegation is not None
        delegation.status = status
        delegation.answer = preview(answer, DELEGATE_ANSWER_CHARS) if answer else None
        if spent is not None:
            delegation.spent = spent
        self.log(now, "system", "delegate_answered", f"{child_id}: {status}")

    # -- approvals ----------------------------------------------------------------
    @property
    def pending_approvals(self) -> list[ApprovalRequest]:
        return [a for a in self.approvals if a.status is ApprovalStatus.PENDING]

    def request_approval(self, request: ApprovalRequest) -> None:
        self.approvals.append(request)
        self.status = RunStatus.AWAITING_APPROVAL
        self.log(request.requested_at, "policy", "approval_requested", request.tool)

    def requests_named(self, request_id: str) -> int:
        return sum(1 for a in self.approvals if a.request_id == request_id)

    def find_pending_approval(self, request_id: str | None) -> ApprovalRequest | None:
        """The request a decision names, or the only one waiting when it names none."""
        return _named_or_only(self.pending_approvals, request_id, lambda a: a.request_id)

    def decision_error(self, decision: Decision, approved: bool = False) -> str | None:
        """Why this decision cannot apply now; None when it can."""
        if self.status.is_closed:
            return f"the run is {self.status.value}"
        if decision.request_id is not None:
            named = [a for a in self.approvals if a.request_id == decision.request_id]
            if not named:
                return f"no approval request {decision.request_id!r}"
            if not any(a.status is ApprovalStatus.PENDING for a in named):
                # The latest of that id: a model may reuse a tool call's id.
                known = named[-1]
                return (
                    f"request {decision.request_id} was already {known.status.value} "
                    f"by {known.decided_by}"
                )
        request = self.find_pending_approval(decision.request_id)
        if request is None:
            pending = [a.request_id for a in self.pending_approvals]
            if not pending:
                return "no approval is pending"
            return f"several approvals are pending; name one of {', '.join(pending)}"
        if decision.request_id is None and self.requests_named(request.request_id) > 1:
            return f"more than one request had the id {request.request_id}: name it"
        if not self.policy.may_decide(request.tool, decision.by, request.escalated):
            return f"{decision.by} may not decide {request.tool} requests in this run"
        if request.tool == BUDGET_REQUEST and approved:
            return "a spent budget is not approved but raised (raise_budget), or rejected to stop"
        return None

    def decide(self, decision: Decision, approved: bool, now: datetime) -> ApprovalRequest:
        """Apply a decision that decision_error() accepted."""
        request = self.find_pending_approval(decision.request_id)
        assert request is not None, "decide() called for a decision that cannot apply"
        request.status = ApprovalStatus.APPROVED if approved else ApprovalStatus.REJECTED
        request.decided_by = decision.by
        request.decided_at = now
        request.comment = decision.comment
        self._leave_wait()
        self.log(now, decision.by, request.status.value, f"{request.tool} {request.request_id}")
        return request

    def rewind_error(self, moment: int) -> str | None:
        if moment > self.moment:
            return f"the run has no moment {moment} yet (it is at {self.moment})"
        return None

    def refuse(self, by: str, error: str, now: datetime) -> None:
        """Record a decision that did not count, and why (the audit keeps every attempt)."""
        self.log(now, "policy", "decision_refused", preview(f"{by}: {error}", 500))

    def escalate(self, request: ApprovalRequest, deadline: datetime, now: datetime) -> None:
        request.escalated = True
        request.deadline = deadline
        self.log(now, "deadline", "escalated", f"{request.tool} {request.request_id}")

    # -- questions ----------------------------------------------------------------
    @property
    def pending_questions(self) -> list[Question]:
        return [q for q in self.questions if q.status is QuestionStatus.PENDING]

    def ask(self, question: Question) -> None:
        self.questions.append(question)
        self.status = RunStatus.AWAITING_INPUT
        self.log(question.asked_at, "model", "question_asked", preview(question.question, 80))

    def answer_error(self, answer: Answer) -> str | None:
        if self.status.is_closed:
            return f"the run is {self.status.value}"
        if answer.question_id is not None:
            known = next((q for q in self.questions if q.question_id == answer.question_id), None)
            if known is None:
                return f"no question {answer.question_id!r}"
            if known.status is not QuestionStatus.PENDING:
                return f"question {answer.question_id} is already {known.status.value}"
        question = self.find_pending_question(answer.question_id)
        if question is None:
            return "no question is pending" if not self.pending_questions else "name the question"
        if question.options is not None and answer.answer not in question.options:
            return f"answer must be one of {', '.join(question.options)}"
        return None

    def answer(self, answer: Answer, now: datetime) -> Question:
        question = self.find_pending_question(answer.question_id)
        assert question is not None, "answer() called for an answer that cannot apply"
        question.status = QuestionStatus.ANSWERED
        question.answer = answer.answer
        question.answered_by = answer.by
        question.answered_at = now
        self._leave_wait()
        self.log(now, answer.by, "answered", question.question_id)
        return question

    def expire(self, question: Question, now: datetime) -> None:
        question.status = QuestionStatus.EXPIRED
        self._leave_wait()
        self.log(now, "deadline", "question_expired", question.question_id)

    def find_pending_question(self, question_id: str | None) -> Question | None:
        """The question an answer names, or the only one waiting when it names none."""
        return _named_or_only(self.pending_questions, question_id, lambda q: q.question_id)

    def _leave_wait(self) -> None:
        if self.pending_approvals:
            self.status = RunStatus.AWAITING_APPROVAL
        elif self.pending_questions:
            self.status = RunStatus.AWAITING_INPUT
        elif not self.status.is_closed:
            self.status = RunStatus.RUNNING if self.plan else RunStatus.PLANNING

    # -- interruptions and edits --------------------------------------------------
    def request_pause(self, actor: Actor, now: datetime) -> None:
        self.pause_requested = True
        self.log(now, actor.by, "pause_requested", actor.reason)

    def enter_pause(self) -> None:
        self.status = RunStatus.PAUSED

    def resume(self, actor: Actor, now: datetime) -> None:
        self.pause_requested = False
        if self.status is RunStatus.PAUSED:
            self._leave_wait()
        self.log(now, actor.by, "resumed", actor.reason)

    def request_cancel(self, actor: Actor, now: datetime) -> None:
        self.cancel_requested_by = actor.by
        self.log(now, actor.by, "cancel_requested", actor.reason)

    def cancel(self, now: datetime) -> None:
        self.status = RunStatus.CANCELLED
        for request in self.pending_approvals:
            request.status = ApprovalStatus.REJECTED
            request.decided_by = "cancelled"
            request.decided_at = now
        for question in self.pending_questions:
            question.status = QuestionStatus.EXPIRED
        self.log(now, self.cancel_requested_by or "temporal", "run_cancelled")

    def patch_error(self, patch: StatePatch) -> str | None:
        if self.status.is_closed:
            return f"the run is {self.status.value}; a closed run cannot be edited"
        if not patch.changes():
            return "the patch changes nothing: give goal, pending_steps or context"
        if patch.pending_steps is not None and not self.plan:
            return "the run has no plan yet; edit the steps once it has one"
        return None

    def apply_patch(self, patch: StatePatch, now: datetime) -> list[str]:
        """Apply a patch that patch_error() accepted; returns what changed, for the model."""
        changed: list[str] = []
        if patch.goal is not None:
            self.goal = patch.goal
            changed.append(f"the goal is now: {patch.goal}")
        if patch.pending_steps is not None:
            kept = [s for s in self.plan if s.status is not StepStatus.PENDING]
            fresh = [
                PlanStep(index=len(kept) + i, title=title)
                for i, title in enumerate(patch.pending_steps, start=1)
            ]
            self.plan = kept + fresh
            titles = "; ".join(patch.pending_steps) or "(none)"
            changed.append(f"the remaining steps are now: {titles}")
        if patch.context is not None:
            self.context = list(patch.context)
            changed.append("the gathered context was replaced")
        detail = json.dumps(patch.changes(), sort_keys=True, default=str)
        self.log(now, patch.by, "edited", preview(detail, 500))
        self.notes_for_model.append(f"{patch.by} edited the run: " + "; ".join(changed) + ".")
        return changed

    # -- lifecycle ----------------------------------------------------------------
    def complete(self, answer: str, now: datetime) -> None:
        self.final_answer = answer[:FINAL_ANSWER_CHARS]
        self.status = RunStatus.COMPLETED
        self.log(now, "system", "run_completed")

    def fail(self, error: str, now: datetime) -> None:
        self.errors.append(error)
        self.status = RunStatus.FAILED
        self.log(now, "system", "run_failed", preview(error))

    def note_moment(self, kind: str, detail: str, now: datetime, seq: int | None) -> None:
        """Keep the moment just reached for the event protocol (the latest EVENTS_KEPT)."""
        event = RunEvent(
            offset=self.moment,
            at=now,
            kind=kind,
            detail=detail,
            status=self.status,
            step=self.current_step,
            seq=seq,
        )
        self.events = [*self.events[-(EVENTS_KEPT - 1) :], event]

    def event_page(self, after: int) -> EventPage:
        return EventPage(
            summary=RunSummary.of(self),
            store_key=self.store_key,
            first_kept=self.events[0].offset if self.events else None,
            events=[e for e in self.events if e.offset > after],
        )

    def log(self, now: datetime, actor: str, action: str, detail: str = "") -> None:
        self.audit.append(AuditEntry(at=now, actor=actor, action=action, detail=detail))
        self.updated_at = now

    # -- forks ----------------------------------------------------------------------
    def forked(self, run_id: str, parent_run_id: str, now: datetime) -> RunState:
        """This state as the start of a new run: the phase in progress at this moment (the
        plan, a step, or the final answer) starts over; everything before it is kept, so
        effects before it are not repeated, and from it on the new run has its own keys."""
        fork = self.model_copy(deep=True)
        fork.run_id, fork.identity = run_id, None  # the fork's own is set when it starts
        fork.parent = ForkOrigin(run_id=parent_run_id, moment=self.moment)
        fork.next_seq = self.phase_start_seq
        restarting = {s.index for s in fork.plan if s.status is StepStatus.RUNNING}
        for step in fork.plan:
            if step.index in restarting:
                step.status, step.turns, step.started_at = StepStatus.PENDING, 0, None
        fork.results = [r for r in fork.results if r.step not in restarting]
        fork.approvals = [
            a
            for a in fork.approvals
            if a.step not in restarting and a.status is not ApprovalStatus.PENDING
        ]
        fork.questions = [
            q
            for q in fork.questions
            if q.step not in restarting and q.status is not QuestionStatus.PENDING
        ]
        fork.outbox, fork.notes_for_model, fork.errors, fork.events = [], [], [], []
        fork.effects = EffectsReport()  # the parent's effects were the parent's
        fork.signed_nonces = []  # signed for the parent's identity, not the fork's
        # A sub-agent's finished answer is reused by the fork for the same task; one still
        # running belonged to the parent's moment and is not the fork's.
        fork.delegations = [
            d.model_copy(update={"inherited": True})
            for d in fork.delegations
            if d.status != "running"
        ]
        fork.current_step, fork.final_answer = None, None
        fork.pause_requested, fork.cancel_requested_by = False, None
        # A fork of a sub-agent's run is a run of its own: no parent awaits it or its spend.
        fork.delegated_by = None
        fork.status = RunStatus.RUNNING if fork.plan else RunStatus.PLANNING
        fork.created_at = now
        fork.log(now, "system", "forked", f"from {parent_run_id} at moment {self.moment}")
        return fork

    # -- views ----------------------------------------------------------------------
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


def _named_or_only(pending: list[T], wanted: str | None, key: Callable[[T], str]) -> T | None:
    """The pending item a person named, or the only one pending when they named none."""
    if wanted is None:
        return pending[0] if len(pending) == 1 else None
    return next((item for item in pending if key(item) == wanted), None)


class RunSummary(BaseModel):
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
            progress=state.progress_line(),
            steps_total=len(state.plan),
            steps_done=len(state.completed_steps),
            current_step=state.current_step,
            waiting_for=state.waiting_for,
            pending_approvals=state.pending_approvals,
            pending_questions=state.pending_questions,
            usage=state.usage,
            final_answer=state.final_answer,
            errors=state.errors,
            parent=state.parent,
            budget=state.budget,
            spent=state.spent,
            delegated_by=state.delegated_by,
            delegations=state.delegations,
        )


def pack_state(state: RunState) -> str:
    """The state a continue-as-new carries, compressed: it is written twice (the
    continue-as-new event and the next run's start), and a long plan of step titles and
    results shrinks several times over."""
    return base64.b64encode(zlib.compress(state.model_dump_json().encode(), 6)).decode()


def unpack_state(packed: str) -> RunState:
    return RunState.model_validate_json(zlib.decompress(base64.b64decode(packed)))


EventPage.model_rebuild()
