"""The run's state: one pydantic model, the source of truth, owning its transitions.

Handlers and the workflow loop stay thin: every change goes through a method of RunState,
so the rules live in one place, grouped by concern: its fields (state_fields.py), people's
decisions and answers (state_decisions.py), the budget and delegations (state_budget.py),
and the lifecycle here. The records it keeps are in records.py.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from durable_agents.workflows.activity_io import ChatMessage, TokenUsage
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import (
    EFFECTS_LISTED,
    DelegatedBy,
    EffectsReport,
    EffectSummary,
    RunBudget,
    RunLimits,
    RunPolicy,
    RunRequest,
    Spend,
)
from durable_agents.workflows.conversation_records import ConversationFields
from durable_agents.workflows.people_inputs import Actor, KeyRevocation, StatePatch
from durable_agents.workflows.records import (
    EVENTS_KEPT,
    FINAL_ANSWER_CHARS,
    RECENT_RESULTS_KEPT,
    ApprovalRequest,
    ApprovalStatus,
    Delegation,
    ForkOrigin,
    PlanStep,
    Question,
    QuestionStatus,
    RunEvent,
    RunStatus,
    StepStatus,
    ToolResultRecord,
    Usage,
)
from durable_agents.workflows.state_budget import BudgetRules

T = TypeVar("T")
# What a conversation's state keeps of each growing record across a continue-as-new.
LONG_LIFE_KEPT = 200


class RunState(BudgetRules):
    """The run's state: its fields (state_fields.py), the decisions' and the budget's rules
    (state_decisions.py, state_budget.py) and, here, its lifecycle: plan and steps,
    messages for the model, results, pause, cancel, end, moments, forks."""

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
        state.log(now, "system", "run_started", preview(request.goal))
        return state

    def queue_message(
        self,
        role: str,
        content: str,
        tool_call_id: str | None = None,
        speaker: str | None = None,
    ) -> None:
        """Queue a small message; the next model call writes it to the transcript."""
        message = ChatMessage.model_validate(
            {
                "seq": self.take_seq(),
                "role": role,
                "content": content,
                "tool_call_id": tool_call_id,
                "speaker": speaker,
            }
        )
        self.outbox.append(message)

    def take_seq(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def note_written(self, rows: int) -> None:
        """`rows` more of the run's transcript rows are in its store (a call that wrote
        them came back)."""
        if self.transcript_rows is not None:
            self.transcript_rows += rows

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

    def record_tool_result(
        self, step: int, call_id: str, tool: str, *, ok: bool, summary: str, seq: int, now: datetime
    ) -> None:
        """What a tool call came to, as the state keeps it: the one place its record is made."""
        record = ToolResultRecord(
            step=step, tool_call_id=call_id, tool=tool, ok=ok, summary=summary, seq=seq
        )
        self.results.append(record)
        self.results = self.results[-RECENT_RESULTS_KEPT:]
        self.results_total += 1
        self.updated_at = now

    def tell_tool_result(
        self,
        step: int,
        call_id: str,
        tool: str,
        *,
        ok: bool,
        text: str,
        now: datetime,
        seq: int | None = None,
    ) -> None:
        """A tool call's result the workflow words itself (a failure, a sub-agent's answer):
        the model hears `text`; the record points at `seq` (else at what it hears)."""
        self.queue_message("tool", text, call_id)
        at = seq if seq is not None else self.outbox[-1].seq
        self.record_tool_result(step, call_id, tool, ok=ok, summary=preview(text), seq=at, now=now)

    def record_effect(self, effect: EffectSummary) -> None:
        self.effects.total += 1
        self.effects.recent = [*self.effects.recent, effect][-EFFECTS_LISTED:]

    def record_usage(self, usage: TokenUsage, *, memoized: bool) -> None:
        self.usage.add(usage, memoized=memoized)
        if not memoized:
            tokens = usage.input_tokens + usage.output_tokens
            self.last_call = Spend(usd=usage.cost_usd, tokens=tokens)

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

    def revoke_keys(self, revoked: KeyRevocation, now: datetime) -> bool:
        """Keys whose signatures count no more here; False when all were revoked already."""
        # Only keys this run trusts: a flood of made-up ids cannot grow the state.
        trusted = self.policy.trusted_keys
        fresh = [k for k in revoked.key_ids if k in trusted and k not in self.revoked_keys]
        if not fresh:
            return False
        self.revoked_keys = [*self.revoked_keys, *fresh]
        self.log(now, revoked.by, "keys_revoked", f"{', '.join(fresh)} {revoked.reason}".strip())
        return True

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
        if patch.pending_steps is not None and self.conversation is not None:
            return "a conversation's steps are its turns: send a message instead"
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

    def for_readers(self) -> RunState:
        """This state as a query hands it out: without the spend reports' tokens (a parent
        checks a child's report by it; whoever read it could report for the child). A
        shallow copy: the rest is shared, read-only, with the run."""
        hidden = self.model_copy()
        hidden.delegations = [hide_token(d) for d in self.delegations]
        if self.delegated_by is not None:
            hidden.delegated_by = hide_token(self.delegated_by)
        return hidden

    def forked(self, run_id: str, parent_run_id: str, now: datetime) -> RunState:
        """This state as the start of a new run: the phase in progress at this moment (the
        plan, a step, or the final answer) starts over; everything before it is kept, so
        effects before it are not repeated, and from it on the new run has its own keys."""
        fork = self.model_copy(deep=True)
        fork.run_id, fork.identity = run_id, None  # the fork's own is set when it starts
        fork.parent = ForkOrigin(run_id=parent_run_id, moment=self.moment)
        fork.next_seq = self.phase_start_seq
        fork.transcript_rows = None  # what the copy of the parent's past brings (Beginnings)
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

    def call_key(self, call_id: str) -> str:
        """A tool call's part of its idempotency key: the model's call id, and in a
        conversation the message the turn answers too, so a turn number used again (after
        a rewind) with a model that numbers its calls never finds another turn's effect."""
        convo = self.conversation
        if convo is None or not convo.queue or self.current_step is None:
            return call_id
        return f"{convo.queue[0].message_id}/{call_id}"

    def trim_for_a_long_life(self, kept: int = LONG_LIFE_KEPT) -> None:
        """Before a conversation continues as new: the records that grow with every turn
        keep their latest `kept` (those still pending all), so the state it carries stays
        bounded over weeks; the earlier runs' histories keep the rest."""
        self.approvals = _latest(self.approvals, kept, lambda a: a.status is ApprovalStatus.PENDING)
        self.questions = _latest(self.questions, kept, lambda q: q.status is QuestionStatus.PENDING)
        self.delegations = _latest(self.delegations, kept, lambda d: d.status == "running")
        self.audit, self.errors = self.audit[-kept:], self.errors[-kept:]

    @property
    def waiting_for(self) -> str:
        """What a human must do for the run to go on ('' when nothing)."""
        return {
            RunStatus.AWAITING_APPROVAL: "approval",
            RunStatus.AWAITING_INPUT: "input",
            RunStatus.PAUSED: "resume",
        }.get(self.status, "")

    def _conversation_line(self) -> str:
        convo = self.conversation
        assert convo is not None
        turns = f"conversation, {convo.turns_total} turns"
        if self.status.is_closed:
            return f"{self.status.value} ({turns})"
        if self.current_step is not None:
            return f"{turns} — answering turn {self.current_step}, {len(convo.queue)} queued"
        return f"{turns} — waiting for a message" if not convo.closed else f"{turns} — closing"

    def progress_line(self) -> str:
        """One line for the Web UI's current details and the CLI."""
        total = len(self.plan)
        if self.status is RunStatus.PLANNING:
            return "planning"
        if self.conversation is not None and (
            self.status.is_closed or self.status is RunStatus.RUNNING
        ):
            return self._conversation_line()
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
            progress=state.progress_line(),
            steps_total=len(state.plan),
            steps_done=len(state.completed_steps),
            current_step=state.current_step,
            waiting_for=state.waiting_for,
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


def pack_state(state: RunState) -> str:
    """The state a continue-as-new carries, compressed: it is written twice (the
    continue-as-new event and the next run's start), and a long plan of step titles and
    results shrinks several times over."""
    return base64.b64encode(zlib.compress(state.model_dump_json().encode(), 6)).decode()


# A carried state inflates to at most this (a state that large is far past what a run
# keeps: its lists are capped), and its packed form is at most this long: a start input
# that inflates without bound never takes the worker's memory (the admission refuses it).
MAX_STATE_BYTES = 32 * 1024 * 1024
MAX_PACKED_STATE_CHARS = 4 * 1024 * 1024


class StateTooLarge(ValueError):
    """A carried state that would inflate past MAX_STATE_BYTES."""


def unpack_state(packed: str) -> RunState:
    """The carried state, inflated only up to MAX_STATE_BYTES."""
    inflater = zlib.decompressobj()
    raw = inflater.decompress(base64.b64decode(packed, validate=True), MAX_STATE_BYTES)
    if inflater.unconsumed_tail:
        raise StateTooLarge(f"the carried state inflates past {MAX_STATE_BYTES} bytes")
    if not inflater.eof:
        raise ValueError("the carried state is cut short")
    return RunState.model_validate_json(raw)


def carried_state(request: RunRequest) -> RunState | None:
    """The state a continue-as-new request carries (packed, or whole from older runs);
    None for a request that starts a run afresh."""
    if request.resume_state_packed is not None:
        return unpack_state(request.resume_state_packed)
    if request.resume_state is not None:
        return RunState.model_validate(request.resume_state)
    return None


def _latest(records: list[T], kept: int, still_open: Callable[[T], bool]) -> list[T]:
    """The records still open and the latest `kept` of the others, in their order."""
    closed = [i for i, record in enumerate(records) if not still_open(record)]
    dropped = set(closed[:-kept]) if kept else set(closed)
    return [record for i, record in enumerate(records) if i not in dropped]


TokenHolder = TypeVar("TokenHolder", Delegation, DelegatedBy)


def hide_token(held: TokenHolder) -> TokenHolder:
    """A delegation (or a child's link to its parent) without its spend-report token."""
    return held if held.report_token is None else held.model_copy(update={"report_token": None})
