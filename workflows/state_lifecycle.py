"""Records of the run's state that its work moves: where it is (Lifecycle), its plan and
steps (Steps), what the model will hear and where the transcript stands (Transcript),
and what its tool calls came to (ToolOutcomes). Each writes only its own fields
(state_write.write)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from durable_agents.workflows.activity_io import ChatMessage
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import EFFECTS_LISTED, EffectsReport, EffectSummary
from durable_agents.workflows.people_inputs import Actor
from durable_agents.workflows.records import (
    FINAL_ANSWER_CHARS,
    RECENT_RESULTS_KEPT,
    PlanStep,
    RunStatus,
    StepStatus,
    ToolResultRecord,
)
from durable_agents.workflows.state_records import AuditLog, Thread
from durable_agents.workflows.state_shape import (
    LifecycleFields,
    OutcomesFields,
    StateShape,
    StepsFields,
    TranscriptFields,
    fields_of,
    pending_approvals,
    pending_questions,
)
from durable_agents.workflows.state_write import write


class Lifecycle:
    """Where the run is: its status, a pause or cancel asked for, how it ended."""

    OWNS: ClassVar[frozenset[str]] = fields_of(LifecycleFields)

    def __init__(self, state: StateShape) -> None:
        self._s = state

    def wait_for(self, status: RunStatus) -> None:
        """The run waits for a person (an approval or an answer)."""
        write(self._s, self, status=status)

    def leave_wait(self) -> None:
        """What the run does once a person acted: wait on for what is still asked, or go on."""
        if pending_approvals(self._s):
            status = RunStatus.AWAITING_APPROVAL
        elif pending_questions(self._s):
            status = RunStatus.AWAITING_INPUT
        elif not self._s.status.is_closed:
            status = self._going_on()
        else:
            return
        write(self._s, self, status=status)

    def _going_on(self) -> RunStatus:
        """Where a run that waits for nobody is: running its plan, or planning."""
        return RunStatus.RUNNING if self._s.plan else RunStatus.PLANNING

    def run(self) -> None:
        """The run has its plan (or a conversation its first message): it runs."""
        write(self._s, self, status=RunStatus.RUNNING)

    def request_pause(self, actor: Actor, now: datetime) -> None:
        write(self._s, self, pause_requested=True)
        AuditLog(self._s).log(now, actor.by, "pause_requested", actor.reason)

    def enter_pause(self) -> None:
        write(self._s, self, status=RunStatus.PAUSED)

    def resume(self, actor: Actor, now: datetime) -> None:
        write(self._s, self, pause_requested=False)
        if self._s.status is RunStatus.PAUSED:
            self.leave_wait()
        AuditLog(self._s).log(now, actor.by, "resumed", actor.reason)

    def request_cancel(self, actor: Actor, now: datetime) -> None:
        write(self._s, self, cancel_requested_by=actor.by)
        AuditLog(self._s).log(now, actor.by, "cancel_requested", actor.reason)

    def cancel(self, now: datetime) -> None:
        """The run ends cancelled (state.cancel closes what it asked people, too)."""
        write(self._s, self, status=RunStatus.CANCELLED)
        AuditLog(self._s).log(now, self._s.cancel_requested_by or "temporal", "run_cancelled")

    def keep_output(self, output: dict[str, Any]) -> None:
        """A typed agent's answer, as its declared type's JSON."""
        write(self._s, self, output=output)

    def complete(self, answer: str, now: datetime) -> None:
        write(self._s, self, final_answer=answer[:FINAL_ANSWER_CHARS], status=RunStatus.COMPLETED)
        AuditLog(self._s).log(now, "system", "run_completed")

    def fail(self, error: str, now: datetime) -> None:
        write(self._s, self, errors=[*self._s.errors, error], status=RunStatus.FAILED)
        AuditLog(self._s).log(now, "system", "run_failed", preview(error))

    def forked(self) -> None:
        """A fork starts where its parent was, without its parent's asks or ending."""
        write(
            self._s,
            self,
            errors=[],
            final_answer=None,
            pause_requested=False,
            cancel_requested_by=None,
            status=self._going_on(),
        )

    def trim(self, kept: int) -> None:
        write(self._s, self, errors=self._s.errors[-kept:])

    @property
    def waiting_for(self) -> str:
        """What a human must do for the run to go on ('' when nothing)."""
        return {
            RunStatus.AWAITING_APPROVAL: "approval",
            RunStatus.AWAITING_INPUT: "input",
            RunStatus.PAUSED: "resume",
        }.get(self._s.status, "")

    def progress_line(self) -> str:
        """One line for the Web UI's current details and the CLI."""
        state = self._s
        total = len(state.plan)
        if state.status is RunStatus.PLANNING:
            return "planning"
        if state.conversation is not None and (
            state.status.is_closed or state.status is RunStatus.RUNNING
        ):
            return self._conversation_line()
        if state.status.is_closed:
            done = len(Steps(state).completed)
            return f"{state.status.value} ({done}/{total} steps done)"
        step = next((s for s in state.plan if s.index == state.current_step), None)
        where = f"step {step.index}/{total}: {step.title}" if step else f"{total} steps"
        if state.status is RunStatus.AWAITING_APPROVAL:
            tools = ", ".join(a.tool for a in pending_approvals(state))
            return f"{where} — awaiting approval ({tools})"
        if state.status is RunStatus.AWAITING_INPUT:
            asked = "; ".join(preview(q.question, 60) for q in pending_questions(state))
            return f"{where} — awaiting an answer: {asked}"
        running = next((d for d in state.delegations if d.status == "running"), None)
        if running is not None and state.status is RunStatus.RUNNING:
            return f"{where} — waiting for sub-agent {running.agent} ({running.child_id})"
        return f"{where} — {state.status.value}"

    def _conversation_line(self) -> str:
        state = self._s
        convo = Thread(state).conversation_fields
        turns = f"conversation, {convo.turns_total} turns"
        if state.status.is_closed:
            return f"{state.status.value} ({turns})"
        if state.current_step is not None:
            return f"{turns} — answering turn {state.current_step}, {len(convo.queue)} queued"
        return f"{turns} — waiting for a message" if not convo.closed else f"{turns} — closing"


class Steps:
    """The run's plan (a conversation's turns), the step in progress, and the context its
    finished steps gathered."""

    OWNS: ClassVar[frozenset[str]] = fields_of(StepsFields)

    def __init__(self, state: StateShape) -> None:
        self._s = state

    @property
    def completed(self) -> list[PlanStep]:
        return [s for s in self._s.plan if s.status is StepStatus.DONE]

    def set_plan(self, titles: list[str], now: datetime) -> None:
        plan = [PlanStep(index=i, title=t) for i, t in enumerate(titles, start=1)]
        write(self._s, self, plan=plan)
        Lifecycle(self._s).run()
        AuditLog(self._s).log(now, "model", "plan_set", f"{len(titles)} steps")

    def next_step(self) -> PlanStep | None:
        return next((s for s in self._s.plan if s.status is not StepStatus.DONE), None)

    def add_turn(self, step: PlanStep, kept: int) -> None:
        """A conversation's next turn, as a step (the latest `kept` turns stay)."""
        write(self._s, self, plan=[*self._s.plan, step][-kept:])

    def start_step(self, step: PlanStep, now: datetime) -> None:
        step.status = StepStatus.RUNNING
        step.started_at = step.started_at or now
        write(self._s, self, current_step=step.index)
        AuditLog(self._s).touch(now)

    def complete_step(self, step: PlanStep, result: str, now: datetime) -> None:
        step.status = StepStatus.DONE
        step.result = preview(result)
        step.finished_at = now
        context = [*self._s.context, f"step {step.index}: {preview(result, 120)}"]
        write(self._s, self, current_step=None, context=context[-RECENT_RESULTS_KEPT:])
        AuditLog(self._s).touch(now)

    def count_turn(self, step: PlanStep) -> int:
        """One more model turn in this step; returns how many it has taken."""
        step.turns += 1
        return step.turns

    def drop_step(self, step: PlanStep) -> None:
        """A conversation's turn that failed alone: done, and no step in progress."""
        step.status = StepStatus.DONE
        write(self._s, self, current_step=None)

    def replace_pending(self, titles: list[str]) -> None:
        """A person's edit: the steps not begun are these."""
        kept = [s for s in self._s.plan if s.status is not StepStatus.PENDING]
        fresh = [
            PlanStep(index=len(kept) + i, title=title) for i, title in enumerate(titles, start=1)
        ]
        write(self._s, self, plan=kept + fresh)

    def replace_context(self, context: list[str]) -> None:
        write(self._s, self, context=list(context))

    def forked(self) -> set[int]:
        """The step in progress at the fork's moment starts over; returns its index."""
        restarting = {s.index for s in self._s.plan if s.status is StepStatus.RUNNING}
        for step in self._s.plan:
            if step.index in restarting:
                step.status, step.turns, step.started_at = StepStatus.PENDING, 0, None
        write(self._s, self, current_step=None)
        return restarting


class Transcript:
    """Where the run's transcript stands: the next message number, the messages the next
    model call writes, the people's notes the model must hear, the rows written, and where
    the current phase began."""

    OWNS: ClassVar[frozenset[str]] = fields_of(TranscriptFields)

    def __init__(self, state: StateShape) -> None:
        self._s = state

    def queue_message(
        self,
        role: str,
        content: str,
        tool_call_id: str | None = None,
        speaker: str | None = None,
    ) -> ChatMessage:
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
        self._s.outbox.append(message)
        return message

    def take_seq(self) -> int:
        seq = self._s.next_seq
        write(self._s, self, next_seq=seq + 1)
        return seq

    def begin_phase(self) -> None:
        """The plan, a step or the final answer begins here (a fork restarts it from here)."""
        write(self._s, self, phase_start_seq=self._s.next_seq)

    def note_written(self, rows: int) -> None:
        """`rows` more of the run's transcript rows are in its store (a call that wrote
        them came back)."""
        if self._s.transcript_rows is not None:
            write(self._s, self, transcript_rows=self._s.transcript_rows + rows)

    def held_at(self, queue: str) -> None:
        """The run's store is the one of the worker polling `queue`: its store-bound
        activities go there from now on."""
        write(self._s, self, store_queue=queue)

    def rows_copied(self, rows: int | None) -> None:
        """A fork's count starts at what the copy of its parent's past put under its key."""
        write(self._s, self, transcript_rows=rows)

    def note_for_model(self, note: str) -> None:
        self._s.notes_for_model.append(note)

    def flush_notes(self) -> None:
        """Queue what people did for the model. Called before a new instruction, and before a
        model call, after every tool result: tool messages stay right behind the assistant
        message that called them."""
        for note in self._s.notes_for_model:
            self.queue_message("user", note)
        write(self._s, self, notes_for_model=[])

    def drain_outbox(self) -> list[ChatMessage]:
        """Messages for the next model call."""
        self.flush_notes()
        messages = self._s.outbox
        write(self._s, self, outbox=[])
        return messages

    def forked(self) -> None:
        """The phase in progress at the fork's moment starts over: its messages are the
        fork's to write again; the transcript rows are counted once the copy is made."""
        write(
            self._s,
            self,
            next_seq=self._s.phase_start_seq,
            transcript_rows=None,
            outbox=[],
            notes_for_model=[],
        )


class ToolOutcomes:
    """What the run's tool calls came to: the latest results (and how many in all), and
    the side effects the effect ledger recorded."""

    OWNS: ClassVar[frozenset[str]] = fields_of(OutcomesFields)

    def __init__(self, state: StateShape) -> None:
        self._s = state

    def record(
        self, step: int, call_id: str, tool: str, *, ok: bool, summary: str, seq: int, now: datetime
    ) -> None:
        """What a tool call came to, as the state keeps it: the one place its record is made."""
        record = ToolResultRecord(
            step=step, tool_call_id=call_id, tool=tool, ok=ok, summary=summary, seq=seq
        )
        results = [*self._s.results, record][-RECENT_RESULTS_KEPT:]
        write(self._s, self, results=results, results_total=self._s.results_total + 1)
        AuditLog(self._s).touch(now)

    def tell(
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
        told = Transcript(self._s).queue_message("tool", text, call_id)
        at = seq if seq is not None else told.seq
        self.record(step, call_id, tool, ok=ok, summary=preview(text), seq=at, now=now)

    def record_effect(self, effect: EffectSummary) -> None:
        effects = self._s.effects
        recent = [*effects.recent, effect][-EFFECTS_LISTED:]
        write(self._s, self, effects=EffectsReport(total=effects.total + 1, recent=recent))

    def forked(self, restarting: set[int]) -> None:
        """The restarting step's results are the fork's to make again; the parent's effects
        were the parent's."""
        results = [r for r in self._s.results if r.step not in restarting]
        write(self._s, self, results=results, effects=EffectsReport())
