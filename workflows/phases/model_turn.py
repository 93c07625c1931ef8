"""One model turn: within the budget, with references only (the transcript lives in our
store), memoized by the activity; a reply cut short is not an answer."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows import patches, whatif
    from durable_agents.workflows.activity_io import ModelCallInput, ModelTurn
    from durable_agents.workflows.activity_options import (
        CALL_MODEL,
        model_call,
    )
    from durable_agents.workflows.agents import (
        BEFORE_AGENTS,
    )
    from durable_agents.workflows.contract_base import CUT_SHORT_REASONS, PREVIEW_CHARS
    from durable_agents.workflows.event_kinds import EventKind
    from durable_agents.workflows.state.budget_book import BudgetBook
    from durable_agents.workflows.state.origin import Origin
    from durable_agents.workflows.state.terms import Terms
    from durable_agents.workflows.state.transcript import Transcript


from durable_agents.workflows.phases.activity_call import call_activity
from durable_agents.workflows.phases.budget import Budget
from durable_agents.workflows.phases.context import Phase, RunContext


class ModelTurns(Phase):
    """One model turn at a time, each within the budget."""

    def __init__(
        self,
        ctx: RunContext,
        budget: Budget,
        *,
        book: BudgetBook,
        origin: Origin,
        terms: Terms,
        transcript: Transcript,
    ) -> None:
        super().__init__(ctx)
        self.budget = budget
        self.book, self.origin, self.terms, self.transcript = book, origin, terms, transcript

    async def take(
        self,
        label: str,
        tools: tuple[str, ...],
        *,
        force_tool: str | None = None,
        preview_chars: int = PREVIEW_CHARS,
        answer_chars: int | None = None,
        stream: bool | None = None,
        context_from: int | None = None,
    ) -> ModelTurn:
        await self.ctx.pause_point()
        await self.budget.within("model")
        call = ModelCallInput(
            run_id=self.ctx.run_named(model_call=True),
            append=self.transcript.drain_outbox(),
            reply_seq=self.transcript.take_seq(),
            tools=list(tools),
            force_tool=force_tool,
            # Named unless it is the default: a few bytes less in every step's history.
            agent=None if self.ctx.agent.name == BEFORE_AGENTS else self.ctx.agent.name,
            run_label=self.terms.label,
            label=label,
            preview_chars=preview_chars,
            answer_chars=answer_chars,
            **whatif.model_call_inputs(self.origin.shadow, stream),
            context_from_seq=(
                self.transcript.phase_start_seq
                if self.terms.limits.context == "step"
                else context_from
            ),
            **self.book.call_budget(),
            # A worker whose store lacks the run's past refuses it (activities/store_holds.py).
            rows_written=self.transcript.transcript_rows,
        )
        self.ctx.moment(EventKind.MODEL, f"{label} (seq {call.reply_seq})", call.reply_seq)
        while True:
            turn = await self._call(call)
            if turn.over_budget is None:
                break
            # Not made: it would have passed the budget. Made once someone raises it.
            await self.budget.ask_for_more("model", turn.over_budget)
            call = call.model_copy(update=self.book.call_budget())
        # The messages it appended and its reply are in the store now.
        self.transcript.note_written(len(call.append) + 1)
        self.book.record_usage(turn.usage, memoized=turn.memoized)
        self.ctx.report_spend()
        return turn

    async def _call(self, call: ModelCallInput) -> ModelTurn:
        return await call_activity(
            CALL_MODEL,
            call,
            result=ModelTurn,
            summary=f"model: {call.label}",
            options=model_call(self.terms.limits),
        )

    @staticmethod
    def cut_short(turn: ModelTurn) -> bool:
        """A reply the endpoint cut before the model was done: not an answer."""
        return turn.finish_reason in CUT_SHORT_REASONS and workflow.patched(patches.CUT_SHORT)
