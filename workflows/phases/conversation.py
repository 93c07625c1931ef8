"""A conversation: the run waits for people's messages and answers each with a turn of the
tool loop (approvals, questions, rules, budgets and sub-agents as in any step), in the
order they came. Each turn is a step of the run's plan, so the console, forks, rewinds
and time travel read it like any step; only the last turns stay in the state.

Messages come in through the `send_message` update (workflows/agent.py), which queues the
message before anything else and then, when the sender waits, waits here for its turn to
end. Between turns (or idle, once the run has taken many updates), a conversation
continues as new; the updates still waiting then answer `carried`, new ones are refused
until the fresh run takes them, and their senders ask it with `await_reply`
(control/conversations.py does).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows import signed_changes
    from durable_agents.workflows.contract_base import preview
    from durable_agents.workflows.conversation_records import (
        IDS_REMEMBERED,
        MAX_QUEUED,
        MAX_QUEUED_PER_SENDER,
        MAX_WAITERS,
        MAX_WAITERS_PER_SENDER,
        MESSAGE_PREVIEW_CHARS,
        MOVING,
        TURNS_KEPT,
        TURNS_PER_RUN,
        UPDATES_PER_RUN,
        ConversationFields,
        QueuedMessage,
        ReplyWanted,
        TurnRecord,
        TurnReply,
        UserMessage,
    )
    from durable_agents.workflows.event_kinds import EventKind
    from durable_agents.workflows.records import FINAL_ANSWER_CHARS, PlanStep, RunStatus
    from durable_agents.workflows.state.lifecycle import Lifecycle
    from durable_agents.workflows.state.steps import Steps
    from durable_agents.workflows.state.thread import Thread
    from durable_agents.workflows.state.transcript import Transcript

from durable_agents.workflows.phases.context import (
    Phase,
    RunContext,
    RunFailed,
    failure_reason,
)
from durable_agents.workflows.phases.story import Story, history_is_long
from durable_agents.workflows.phases.turn_loop import TurnLoop, Turns


class Conversation(Phase):
    """A run people talk to: a turn of the tool loop for each message, in order."""

    def __init__(
        self,
        ctx: RunContext,
        loop: TurnLoop,
        story: Story,
        *,
        signing: signed_changes.Signing,
        lifecycle: Lifecycle,
        steps: Steps,
        thread: Thread,
        transcript: Transcript,
    ) -> None:
        super().__init__(ctx)
        self.loop, self.story = loop, story
        # The signed-change check's records (origin, terms, signatures, moments, requests).
        self.signing, self.origin, self.terms = signing, signing.origin, signing.terms
        self.signatures, self.requests = signing.signatures, signing.requests
        self.lifecycle, self.steps, self.thread, self.transcript = (
            lifecycle,
            steps,
            thread,
            transcript,
        )
        # True while the run waits to continue as new: waiting senders answer `carried`.
        self.carrying = False
        # Senders waiting in an update for a reply now, and updates this run has taken
        # (both counted by the handlers, so a replay counts the same).
        self.waiters = 0
        # Senders waiting in an update, by name.
        self.waiting: dict[str, int] = {}
        self.updates_seen = 0

    @property
    def _conversation(self) -> ConversationFields:
        convo = self.thread.conversation
        assert convo is not None, "only a conversation has a thread"
        return convo

    async def tell(self) -> str:
        convo = self._conversation
        if self.lifecycle.status is RunStatus.PLANNING:
            self.lifecycle.run()
            self.ctx.publish()
        while True:
            # Idle: no activity, no timer; a cache may evict the run until a message comes.
            await workflow.wait_condition(
                lambda: bool(convo.queue) or convo.closed or self._continue_due()
            )
            if self._continue_due():
                await self._continue_conversation()
            if not convo.queue:
                break
            await self._take_turn(convo.queue[0])
        return f"Conversation closed by {convo.closed_by or '?'} after {convo.turns_total} turns."

    def _continue_due(self) -> bool:
        return (
            history_is_long(self.terms.limits)
            or self._conversation.turns_this_run >= TURNS_PER_RUN
            or self.updates_seen >= UPDATES_PER_RUN
        )

    async def _continue_conversation(self) -> None:
        # The senders still waiting hear `carried` and ask the fresh run; new updates are
        # refused meanwhile (MOVING); the queue goes along in the state, so no message is
        # lost or answered twice.
        self.carrying = True
        self.thread.new_run()
        self.ctx.trim_for_a_long_life()
        await self.story.continue_as_new(workflow.info().get_current_history_length())

    async def _take_turn(self, message: QueuedMessage) -> None:
        convo = self._conversation
        step = self.steps.next_step()  # a fork restarts the turn it was made in
        if step is None:
            step = PlanStep(index=convo.turns_total + 1, title=_title(message))
            self.steps.add_turn(step, TURNS_KEPT)
        record = TurnRecord(
            turn=step.index,
            message_id=message.message_id,
            by=message.by,
            message=preview(message.text, MESSAGE_PREVIEW_CHARS),
            message_seq=self.transcript.next_seq,
            started_at=workflow.now(),
        )
        # What the model sees: the first message and the turns the state keeps.
        window = convo.turns[0].message_seq if len(convo.turns) >= TURNS_KEPT else None
        self.ctx.moment(EventKind.MESSAGE, f"turn {step.index} from {message.by}")
        self.story.open_step(step, message.text, speaker=message.by)
        try:
            reply, reply_seq = await self._answer_turn(step, window)
            record.reply, record.reply_seq = reply, reply_seq
        except (RunFailed, ActivityError) as err:
            # A turn that cannot be answered (the endpoint refused it, a tool that keeps
            # failing the run's way) fails alone: the conversation goes on.
            record.status, record.error = "failed", failure_reason(err)
            self.steps.drop_step(step)
        record.finished_at = workflow.now()
        self.thread.finish_turn(record, TURNS_KEPT)
        self.ctx.moment(
            EventKind.REPLIED, f"turn {step.index}: {preview(record.reply or record.error, 80)}"
        )

    async def _answer_turn(self, step: PlanStep, window: int | None) -> tuple[str, int]:
        """Model turns until a reply calls no tool: that reply answers the message (a
        reply cut short is sent back, as in a plain loop)."""
        limit = self.terms.limits.max_turns_per_step
        shape = Turns(
            label=lambda turn: f"turn {step.index}.{turn}",
            tools=self.ctx.step_tools(),
            answer_chars=FINAL_ANSWER_CHARS,
            stream=True,
            context_from=window,
            gives_up=f"no reply within {limit} model turns",
        )
        answered = await self.loop.answer(step, shape)
        self.steps.complete_step(step, answered.text, workflow.now())
        return answered.text, answered.seq

    # -- what the handlers ask (workflows/agent.py) --------------------------------------

    def message_error(self, message: UserMessage) -> str | None:
        """Why a message is refused before it reaches the history (None: taken). The
        signature is checked here too: an unsigned message never counts against the run's
        updates or its audit."""
        convo = self.thread.conversation
        if convo is None:
            return f"run {self.origin.run_id} is not a conversation; it takes no messages"
        if self.lifecycle.status.is_closed or convo.closed:
            return f"the conversation {self.origin.run_id} is closed; it takes no messages"
        if self.carrying:
            return MOVING
        if message.wait and (full := self._waiters_full(message.by)) is not None:
            return f"{full}; send without waiting (the reply comes on its events) or later"
        if convo.knows(message.message_id):
            return None  # the same message again: its sender waits for the one reply
        if len(convo.queue) >= MAX_QUEUED:
            return (
                f"the conversation has {len(convo.queue)} messages waiting for their turn; "
                "send again once it has answered"
            )
        mine = sum(queued.by == message.by for queued in convo.queue)
        if self.signatures.people_checks >= 2 and mine >= MAX_QUEUED_PER_SENDER:
            return (
                f"{message.by} has {MAX_QUEUED_PER_SENDER} messages waiting for their turn; "
                "send again once it has answered"
            )
        return signed_changes.change_error(
            self.signing,
            "message",
            message.by,
            message.signed,
            message.what_it_says(),
            workflow.now(),
            version=self._signing_version(),
        )

    def enqueue(self, message: UserMessage) -> None:
        """Queue a message (once per id): before the handler awaits anything, so messages
        are answered in the order the run accepted them."""
        queued = QueuedMessage(
            message_id=message.message_id,
            text=message.text,
            by=message.by,
            received_at=workflow.now(),
        )
        self.thread.take_message(queued, IDS_REMEMBERED)

    def _waiters_full(self, by: str) -> str | None:
        """Why one more sender may not wait in an update (None: it may)."""
        if self.waiters >= MAX_WAITERS:
            return f"{self.waiters} senders already wait on this conversation"
        if self.signatures.people_checks >= 2 and self.waiting.get(by, 0) >= MAX_WAITERS_PER_SENDER:
            return f"{by} already waits on {MAX_WAITERS_PER_SENDER} replies here"
        return None

    def reply_error(self, wanted: ReplyWanted) -> str | None:
        """Why a wait for a reply is refused (None: taken): checked as a message is, the
        signature included, so an unsigned wait never holds one of the few places."""
        convo = self.thread.conversation
        if convo is None:
            return f"run {self.origin.run_id} is not a conversation"
        if self.carrying:
            return MOVING
        if (full := self._waiters_full(wanted.by)) is not None:
            return f"{full}; ask later"
        if not convo.knows(wanted.message_id):
            return (
                f"the conversation has no message {wanted.message_id!r} (or it is too old "
                "to wait on)"
            )
        if self.signatures.people_checks < 2:
            return None  # a run recorded before waits were signed
        return signed_changes.change_error(
            self.signing,
            "await_reply",
            wanted.by,
            wanted.signed,
            wanted.what_it_says(),
            workflow.now(),
            version=self._signing_version(),
        )

    def _signing_version(self) -> int | None:
        """The signatures checked: a conversation takes v2 signatures (it began after they
        existed), whether or not its version is settled yet (None: the run's own)."""
        if self.terms.policy.require_signed_decisions and not self.ctx.signatures_settled:
            return 2
        return None

    async def reply_to(self, message_id: str, by: str) -> TurnReply:
        """Wait until the message's turn is over, stops for a person, or the run moves on."""
        self.waiters += 1
        self.waiting[by] = self.waiting.get(by, 0) + 1
        try:
            await workflow.wait_condition(lambda: self._reply_now(message_id) is not None)
        finally:
            self.waiters -= 1
            self.waiting[by] -= 1
            if not self.waiting[by]:
                del self.waiting[by]
        reply = self._reply_now(message_id)
        assert reply is not None
        return reply

    def _reply_now(self, message_id: str) -> TurnReply | None:
        convo = self._conversation
        done = convo.turn_of(message_id)
        if done is not None:
            return TurnReply(
                message_id=message_id,
                status=done.status,
                turn=done.turn,
                reply=done.reply,
                error=done.error,
            )
        if self.carrying:
            return TurnReply(message_id=message_id, status="carried")
        if self.lifecycle.status.is_closed:
            return TurnReply(message_id=message_id, status="closed")
        current = convo.queue[0] if convo.queue else None
        if current is None or current.message_id != message_id:
            if not convo.is_queued(message_id):
                # Answered long ago: its turn is no longer kept in the state.
                return TurnReply(message_id=message_id, status="answered")
            return None
        waiting = self.waiting_detail()
        if waiting:
            return TurnReply(
                message_id=message_id,
                status="waiting",
                turn=self.steps.current_step,
                waiting_for=waiting,
            )
        return None

    def waiting_detail(self) -> str:
        """What the current turn waits for, named for the sender ('' when nothing)."""
        if self.lifecycle.status is RunStatus.AWAITING_APPROVAL:
            return "; ".join(
                f"approval of {a.tool} (request {a.request_id}: {a.rule})"
                for a in self.requests.pending_approvals
            )
        if self.lifecycle.status is RunStatus.AWAITING_INPUT:
            return "; ".join(
                f"an answer to question {q.question_id}: {preview(q.question, 120)}"
                for q in self.requests.pending_questions
            )
        if self.lifecycle.status is RunStatus.PAUSED:
            return "a resume (the conversation is paused)"
        return ""


def _title(message: QueuedMessage) -> str:
    return preview(f"{message.by}: {message.text}", 120)
