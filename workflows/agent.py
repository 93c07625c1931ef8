"""The agent workflow: a run's story from start to end, and every handler it answers.

The run is told by parts wired here from one run context (workflows/phases/context.py
draws them): plan, then for each step model turns, gate, tool, record; or a
conversation's turns. Here: how a run starts, how it ends, and each signal, update and
query with its wire name, each a few lines over one method of a part or of the state
model. Deterministic code only; every side effect is an activity, called by name
(workflows/activity_options.py), so this module imports nothing that does I/O.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Any, ClassVar

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
)

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from durable_agents.workflows import admission, patches, signed_changes
    from durable_agents.workflows.contract_base import preview
    from durable_agents.workflows.contracts import ChildSpend, RunBudget, RunRequest, RunResult
    from durable_agents.workflows.conversation_records import (
        ConversationView,
        ReplyWanted,
        TurnReply,
        UserMessage,
    )
    from durable_agents.workflows.event_kinds import EventKind
    from durable_agents.workflows.people_inputs import (
        Actor,
        Answer,
        BudgetRaise,
        DecideRequest,
        Decision,
        KeyRevocation,
        RewindRequest,
        StatePatch,
    )
    from durable_agents.workflows.records import ApprovalRequest, Question
    from durable_agents.workflows.registry import trusts_the_clear
    from durable_agents.workflows.signed_changes import Signing
    from durable_agents.workflows.state import (
        EventPage,
        RunState,
        RunSummary,
        apply_patch,
        cancel,
        carried_state,
        event_page,
        for_readers,
        patch_error,
    )

# The phases are imported as workflow code (the strict sandbox checks them too).
from durable_agents.workflows.beginnings.fork import fork_start
from durable_agents.workflows.beginnings.start import ForkStart, Start
from durable_agents.workflows.phases.budget import Budget
from durable_agents.workflows.phases.context import (
    CHILD_SPENT,
    RunContext,
    RunFailed,
    RunStopped,
)
from durable_agents.workflows.phases.conversation import Conversation
from durable_agents.workflows.phases.deciding import People, RecordedDecisions, WaitingForPeople
from durable_agents.workflows.phases.delegating import Delegating
from durable_agents.workflows.phases.gate import Gate
from durable_agents.workflows.phases.inputs import (
    describe,
    events_after,
    refuse_if,
    signal_input,
    update_input,
)
from durable_agents.workflows.phases.model_turn import ModelTurns
from durable_agents.workflows.phases.people import PeopleActions, as_signal, as_update
from durable_agents.workflows.phases.story import Story
from durable_agents.workflows.phases.tool_calls import ToolCalls
from durable_agents.workflows.phases.turn_loop import TurnLoop


# Pinned on a versioned worker (its default behaviour, runtime/versioning.py): a run lives
# on the build that started it; only `agentctl release move`, after replaying its history
# on the new build, moves it.
@workflow.defn(name="AgentWorkflow")
class AgentWorkflow:
    """The run: its parts wired from one context, and every handler people reach it by."""

    # The story a run that is not a conversation tells (a test's build may tell another).
    story_type: ClassVar[type[Story]] = Story

    @workflow.init
    def __init__(self, request: RunRequest) -> None:
        # What the start event alone refuses, before a carried state is inflated; a
        # carried state is inflated only to a bound, and trusted only once the admission
        # (in `run`, before the run does anything) has found it in Temporal's record.
        info = workflow.info()
        self._refused = admission.before_parsing(request, info, trusts_the_clear(info.task_queue))
        # The run's state, decided once, before its context exists: carried over a
        # continue-as-new (the chain goes on), a fork's own, or fresh.
        carried = None if self._refused is not None else self._carried(request)
        fork = None
        if not request.resumes and request.fork is not None:
            fork = fork_start(request.fork, info.workflow_id, workflow.now())
        if carried is not None:
            self.state = carried
            self.state.origin.continued()
        elif fork is not None and fork.state is not None:
            self.state = fork.state
        else:
            self.state = RunState.start(info.workflow_id, request, workflow.now())
        # Asked before any other patch: a new run's opening paths on one marker.
        self._ctx = RunContext(self.state, opened_in_one=workflow.patched(patches.OPENING))
        self._wire(self._ctx, self.state, fork)
        if self._ctx.opening_patched(patches.PEOPLE_CHECKED):
            self.state.signatures.check_people(2)
        self._telling: asyncio.Task[str] | None = None

    def _carried(self, request: RunRequest) -> RunState | None:
        try:
            return carried_state(request)
        except (ValueError, zlib.error) as err:
            why = describe(err) if isinstance(err, ValidationError) else str(err)
            self._refused = f"refused: the carried state cannot be read: {preview(why, 200)}"
            return None

    def _wire(self, ctx: RunContext, s: RunState, fork: ForkStart | None) -> None:
        """The run's parts, each built from the context, the parts it uses and the records
        of the state it uses: what each holds is said here, in one place. Who decides what
        the run asks of people is chosen here, once: a what-if takes its recorded run's
        decisions, any other run waits for real people."""
        signing = Signing(s.origin, s.terms, s.signatures, s.moments, s.requests)
        people: People = (
            RecordedDecisions(ctx, origin=s.origin, requests=s.requests)
            if s.shadow is not None
            else WaitingForPeople(ctx, requests=s.requests, terms=s.terms)
        )
        self._start = Start(
            ctx, fork, lambda: s.agent is not None, signing=signing, audit_log=s.audit_log,
            book=s.budget_book, transcript=s.transcript,
        )  # fmt: skip
        self._budget = Budget(
            ctx, people, book=s.budget_book, lifecycle=s.lifecycle, moments=s.moments,
            requests=s.requests, steps=s.steps,
        )  # fmt: skip
        turns = ModelTurns(
            ctx, self._budget, book=s.budget_book, origin=s.origin, terms=s.terms,
            transcript=s.transcript,
        )  # fmt: skip
        gate = Gate(
            ctx, people, audit_log=s.audit_log, book=s.budget_book, outcomes=s.outcomes,
            requests=s.requests, terms=s.terms, transcript=s.transcript,
        )  # fmt: skip
        delegating = Delegating(
            ctx, book=s.budget_book, origin=s.origin, outcomes=s.outcomes, terms=s.terms,
            thread=s.thread,
        )  # fmt: skip
        tools = ToolCalls(
            ctx, self._budget, gate, delegating, book=s.budget_book, origin=s.origin,
            outcomes=s.outcomes, terms=s.terms, thread=s.thread, transcript=s.transcript,
        )  # fmt: skip
        loop = TurnLoop(ctx, turns, tools, steps=s.steps, terms=s.terms, transcript=s.transcript)
        self._story = self.story_type(
            ctx, loop, audit_log=s.audit_log, lifecycle=s.lifecycle, origin=s.origin,
            steps=s.steps, terms=s.terms, transcript=s.transcript,
        )  # fmt: skip
        self._conversation = Conversation(
            ctx, loop, self._story, signing=signing, lifecycle=s.lifecycle, steps=s.steps,
            thread=s.thread, transcript=s.transcript,
        )  # fmt: skip
        self._people = PeopleActions(ctx, signing=signing)

    async def _tell(self) -> str:
        """A conversation's turns, or the story: what the run was started as."""
        if self.state.conversation is not None:
            return await self._conversation.tell()
        return await self._story.tell()

    @workflow.run
    async def run(self, request: RunRequest) -> RunResult:
        self._ctx.publish()
        if self._refused is not None:
            raise ApplicationError(self._refused, type="StartRefused", non_retryable=True)
        # How the run began (Temporal's record asked where only it shows that), and the
        # check of that row of the admission table: nothing else here decides.
        begun = await admission.begun(request, self.state, workflow.info())
        await admission.ADMISSION[begun.beginning].admits(self._start, begun)
        self._telling = asyncio.create_task(self._tell())
        if self._ctx.cancel_holds():
            self._telling.cancel()
        try:
            result = await self._end_of_story()
            if self.state.conversation is not None:
                # Senders still waiting hear that the conversation closed.
                await workflow.wait_condition(workflow.all_handlers_finished)
            return result
        finally:
            # Signals this run sent (spend reports, forwarded pauses) are delivered before
            # it closes: none is left in flight behind a closed run.
            await self._ctx.signals_sent()

    async def _end_of_story(self) -> RunResult:
        assert self._telling is not None
        try:
            answer = await self._telling
        except (asyncio.CancelledError, RunStopped) as err:
            # Cancelled: by a person (`cancel`), by Temporal (an activity it was running
            # stopped for it: workflows/phases/activity_call.py), or stopped where it asked
            # people to let it go on (RunStopped: the cancel is in their name already).
            cancel(self.state, workflow.now())
            self._ctx.moment(EventKind.CANCELLED, self.state.cancel_requested_by or "temporal")
            if self.state.cancel_requested_by is None:
                # Cancelled through Temporal itself (Web UI, `temporal workflow cancel`):
                # end as Canceled there too.
                raise asyncio.CancelledError() from err
            return RunResult(
                run_id=self.state.run_id, status=self.state.status, spent=self.state.spent
            )
        except (RunFailed, ActivityError) as err:
            # A rule of the run broken, or an activity that failed for good.
            self._ctx.fail(err)
        self.state.lifecycle.complete(answer, workflow.now())
        self._ctx.moment(EventKind.COMPLETED, preview(answer, 80))
        return RunResult(
            run_id=self.state.run_id,
            status=self.state.status,
            final_answer=answer,
            output=self.state.output,
            effects=self.state.effects,
            spent=self.state.spent,
        )

    # -- people: signals (fire and forget) ------------------------------------------------
    # Handlers take whatever the wire carries (`*payload`) and validate it themselves
    # (workflows/phases/inputs.py); under `require_signed_decisions` every change counts
    # only when signed (workflows/signed_changes.py), a refusal is in the audit.

    @workflow.signal
    def approve(self, *payload: Any) -> None:
        if (decision := signal_input("approve", payload, Decision)) is not None:
            decided = DecideRequest.with_verdict(decision, approve=True)
            as_signal("decision", lambda: self._people.decide(decided))

    @workflow.signal
    def reject(self, *payload: Any) -> None:
        if (decision := signal_input("reject", payload, Decision)) is not None:
            decided = DecideRequest.with_verdict(decision, approve=False)
            as_signal("decision", lambda: self._people.decide(decided))

    @workflow.signal(name="answer")
    def answer_signal(self, *payload: Any) -> None:
        if (answer := signal_input("answer", payload, Answer)) is not None:
            as_signal("answer", lambda: self._people.answer(answer))

    @workflow.signal
    def pause(self, *payload: Any) -> None:
        if (actor := signal_input("pause", payload, Actor)) is None:
            return
        if self.state.status.is_closed or self.state.pause_requested:
            return
        if self._people.counts("pause", actor.by, actor.signed, actor.what_it_says()):
            self.state.lifecycle.request_pause(actor, workflow.now())
            self._ctx.moment(EventKind.PAUSE_REQUESTED, actor.by)
            self._ctx.forward("pause", actor)

    @workflow.signal
    def resume(self, *payload: Any) -> None:
        if (actor := signal_input("resume", payload, Actor)) is None:
            return
        if not self._people.counts("resume", actor.by, actor.signed, actor.what_it_says()):
            return
        if self.state.pause_requested:
            self.state.lifecycle.resume(actor, workflow.now())
            self._ctx.moment(EventKind.RESUMED, actor.by)
        self._ctx.forward("resume", actor)

    @workflow.signal
    def cancel(self, *payload: Any) -> None:
        if (actor := signal_input("cancel", payload, Actor)) is None:
            return
        if self.state.status.is_closed or self.state.cancel_requested_by is not None:
            return
        if not self._people.counts("cancel", actor.by, actor.signed, actor.what_it_says()):
            return
        self.state.lifecycle.request_cancel(actor, workflow.now())
        self._ctx.moment(EventKind.CANCEL_REQUESTED, actor.by)
        if self._telling is not None:
            self._telling.cancel()

    @workflow.signal(name="revoke_keys")
    def revoke_keys(self, *payload: Any) -> None:
        """Keys that sign for this run no more (`agentctl keys revoke`): taken from anyone,
        as it only takes trust away; passed on to a running sub-agent."""
        if (revoked := signal_input("revoke_keys", payload, KeyRevocation)) is None:
            return
        if self.state.signatures.revoke(revoked, workflow.now()):
            self._ctx.moment(EventKind.KEYS_REVOKED, ", ".join(revoked.key_ids))
        self._ctx.forward("revoke_keys", revoked)

    @workflow.signal(name=CHILD_SPENT)
    def child_spent(self, *payload: Any) -> None:
        """A sub-agent's run reports its spend: the parent reads it from the child's own
        run then (Delegating), never from the report; one naming no running sub-agent is
        dropped."""
        if (report := signal_input(CHILD_SPENT, payload, ChildSpend)) is None:
            return
        if not self.state.budget_book.child_spent(report.child_id, report.spent, report.token):
            workflow.logger.warning(
                "child_spent dropped: %s is no running sub-agent", report.child_id
            )

    @workflow.signal(name="budget")
    def budget_signal(self, *payload: Any) -> None:
        """A new budget sent by the parent (a person raised the tree's budget there)."""
        if (raise_ := signal_input("budget", payload, BudgetRaise)) is None:
            return
        if (error := self.state.budget_book.budget_raise_error(raise_, workflow.now())) is not None:
            workflow.logger.warning("budget ignored: %s", error)
            return
        if (
            error := signed_changes.forwarded_raise_error(self.state.budget_book, raise_)
        ) is not None:
            self._ctx.refuse(raise_.by, error)
            return
        signed = raise_.forwarded or raise_
        if self._people.counts("raise_budget", signed.by, signed.signed, signed.what_it_says()):
            self._budget.apply_raise(raise_)

    # -- people: updates (answered, validated before they reach the history) -------------

    @workflow.update(name="raise_budget")
    def raise_budget(self, *payload: Any) -> RunBudget:
        raise_ = update_input("raise_budget", payload, BudgetRaise)
        refuse_if(self._budget.raise_error(raise_))
        self._people.must_count("raise_budget", raise_.by, raise_.signed, raise_.what_it_says())
        return self._budget.apply_raise(raise_)

    @raise_budget.validator
    def _validate_raise_budget(self, *payload: Any) -> None:
        refuse_if(self._budget.raise_error(update_input("raise_budget", payload, BudgetRaise)))

    @workflow.update
    def decide(self, *payload: Any) -> ApprovalRequest:
        # Checked again here, not only in the validator: two updates validated in one
        # activation must not both win, and a forged or unsigned decision is recorded.
        request = update_input("decide", payload, DecideRequest)
        return as_update(lambda: self._people.decide(request))

    @decide.validator
    def _validate_decide(self, *payload: Any) -> None:
        request = update_input("decide", payload, DecideRequest)
        refuse_if(self.state.requests.decision_error(request))

    @workflow.update(name="submit_answer")
    def submit_answer(self, *payload: Any) -> Question:
        answer = update_input("submit_answer", payload, Answer)
        return as_update(lambda: self._people.answer(answer))

    @submit_answer.validator
    def _validate_answer(self, *payload: Any) -> None:
        answer = update_input("submit_answer", payload, Answer)
        refuse_if(self.state.requests.answer_error(answer))

    @workflow.update
    def edit(self, *payload: Any) -> RunState:
        patch = update_input("edit", payload, StatePatch)
        refuse_if(patch_error(self.state, patch))
        self._people.must_count("edit", patch.by, patch.signed, patch.changes())
        apply_patch(self.state, patch, workflow.now())
        self._ctx.moment(EventKind.EDITED, patch.by)
        # The answer lands in the history: the kept events stay out (the events query has
        # them), and so do the spend-report tokens of runs that have them, as in a query.
        return for_readers(self.state).model_copy(update={"events": []})

    @edit.validator
    def _validate_edit(self, *payload: Any) -> None:
        refuse_if(patch_error(self.state, update_input("edit", payload, StatePatch)))

    @workflow.update(name="authorize_rewind")
    def authorize_rewind(self, *payload: Any) -> str:
        """`agentctl rewind` asks first, so a run that requires signed changes checks who
        rewinds it (and records it) before the reset; the reset itself is Temporal's."""
        request = update_input("authorize_rewind", payload, RewindRequest)
        refuse_if(self.state.moments.rewind_error(request.moment))
        self._people.must_count("rewind", request.by, request.signed, request.what_it_says())
        self.state.audit_log.log(
            workflow.now(), request.by, "rewind_authorized", f"to {request.moment}"
        )
        return f"rewind to moment {request.moment} authorized for {request.by}"

    @authorize_rewind.validator
    def _validate_rewind(self, *payload: Any) -> None:
        request = update_input("authorize_rewind", payload, RewindRequest)
        refuse_if(self.state.moments.rewind_error(request.moment))

    # -- conversations (workflows/phases/conversation.py) ---------------------------------

    @workflow.update(name="send_message")
    async def send_message(self, *payload: Any) -> TurnReply:
        """A person's message: queued at once (in the order accepted), answered by a turn;
        the update completes when the turn ends or stops for a person (`queued` at once
        when the sender does not wait)."""
        self._conversation.updates_seen += 1
        message = update_input("send_message", payload, UserMessage)
        convo = self.state.conversation
        if convo is None or not convo.knows(message.message_id):
            # Checked again here: two updates validated in one activation must not both
            # take the queue's last place, or one nonce.
            refuse_if(self._conversation.message_error(message))
            self._people.must_count("message", message.by, message.signed, message.what_it_says())
            self._conversation.enqueue(message)
        if not message.wait:
            return TurnReply(message_id=message.message_id, status="queued")
        return await self._conversation.reply_to(message.message_id, message.by)

    @send_message.validator
    def _validate_send_message(self, *payload: Any) -> None:
        refuse_if(
            self._conversation.message_error(update_input("send_message", payload, UserMessage))
        )

    @workflow.update(name="await_reply")
    async def await_reply(self, *payload: Any) -> TurnReply:
        """Wait again for a message's reply: after an approval, or in the fresh run a
        continue-as-new moved the conversation to."""
        self._conversation.updates_seen += 1
        wanted = update_input("await_reply", payload, ReplyWanted)
        refuse_if(self._conversation.reply_error(wanted))
        if self.state.people_checks >= 2:  # a run recorded before waits were signed: as then
            self._people.must_count("await_reply", wanted.by, wanted.signed, wanted.what_it_says())
        return await self._conversation.reply_to(wanted.message_id, wanted.by)

    @await_reply.validator
    def _validate_await_reply(self, *payload: Any) -> None:
        refuse_if(self._conversation.reply_error(update_input("await_reply", payload, ReplyWanted)))

    @workflow.signal(name="end_conversation")
    def end_conversation(self, *payload: Any) -> None:
        """No more messages: the queued ones are answered, then the run completes."""
        if (actor := signal_input("end_conversation", payload, Actor)) is None:
            return
        convo = self.state.conversation
        if convo is None or convo.closed or self.state.status.is_closed:
            return
        if self._people.counts("end_conversation", actor.by, actor.signed, actor.what_it_says()):
            self.state.thread.close(actor, workflow.now())
            self._ctx.moment(EventKind.CONVERSATION_CLOSED, actor.by)

    @workflow.query(name="conversation")
    def get_conversation(self, *_: Any) -> ConversationView:
        convo = self.state.conversation
        if convo is None:
            raise ValueError(f"run {self.state.run_id} is not a conversation")
        return ConversationView(
            run_id=self.state.run_id,
            agent=self.state.agent.name if self.state.agent else None,
            status=self.state.status.value,
            turns_total=convo.turns_total,
            closed=convo.closed,
            waiting_for=self._conversation.waiting_detail(),
            queued=convo.queue,
            turns=convo.turns,
            waiters=self._conversation.waiters,
        )

    # -- queries: they take no input, and ignore any sent ---------------------------------

    @workflow.query(name="state")
    def get_state(self, *_: Any) -> RunState:
        return for_readers(self.state)

    @workflow.query(name="summary")
    def get_summary(self, *_: Any) -> RunSummary:
        return RunSummary.of(self.state)

    @workflow.query(name="events")
    def get_events(self, *payload: Any) -> EventPage:
        """The run's events after an offset (docs/events.md): `{"after": N}`, or nothing
        for all it keeps. Answers without touching the history."""
        return event_page(self.state, events_after(payload))

    @workflow.query(name="pending_approvals")
    def get_pending_approvals(self, *_: Any) -> list[ApprovalRequest]:
        return self.state.pending_approvals

    @workflow.query(name="pending_questions")
    def get_pending_questions(self, *_: Any) -> list[Question]:
        return self.state.pending_questions
