"""The turn loop: model turns until a reply ends them, with each tool call the model
asks for handled between. It serves a plan's step, a plain loop, a conversation's turn
and the final answer; what differs between them is a `Turns` of parameters.

A reply cut short (the endpoint stopped it: its length, a filter) is never the answer:
the model is told (`cut_short`) and goes on; its part is kept for the answer where the
loop joins parts (an answer written over several replies), else dropped (a step's
summary is its last whole reply).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows import prompts
    from durable_agents.workflows.contract_base import PREVIEW_CHARS
    from durable_agents.workflows.records import PlanStep
    from durable_agents.workflows.state.steps import Steps
    from durable_agents.workflows.state.terms import Terms
    from durable_agents.workflows.state.transcript import Transcript

from durable_agents.workflows.phases.context import Phase, RunContext, RunFailed
from durable_agents.workflows.phases.model_turn import ModelTurns
from durable_agents.workflows.phases.tool_calls import ToolCalls


@dataclass(frozen=True)
class Turns:
    """What one kind of loop does differently."""

    label: Callable[[int], str]  # the model call's label, from the turn's number
    tools: tuple[str, ...] = ()  # none: a reply's tool calls are not looked at
    preview_chars: int = PREVIEW_CHARS
    answer_chars: int | None = None
    stream: bool | None = None  # a person waits on the reply: streamed
    context_from: int | None = None  # the conversation's window
    cut_short: str = prompts.FINAL_CUT_SHORT  # what the model is told of a cut reply
    joins_parts: bool = True  # the answer is every part since the last tool call
    only_complete_step_ends: bool = False  # a reply with no tool call does not end it
    # A `complete_step` call ends it (a plan's step); elsewhere its summary is not looked
    # at and the turns go on.
    complete_step_ends: bool = False
    # Why the run fails when the turns run out; None: the parts so far are the answer.
    gives_up: str | None = None


@dataclass(frozen=True)
class Answered:
    text: str
    seq: int  # the transcript entry of the reply that ended it (or of the last turn)


class TurnLoop(Phase):
    """Model turns, tool calls between them, until a reply answers."""

    def __init__(
        self,
        ctx: RunContext,
        turns: ModelTurns,
        tools: ToolCalls,
        *,
        steps: Steps,
        terms: Terms,
        transcript: Transcript,
    ) -> None:
        super().__init__(ctx)
        self.turns, self.tools = turns, tools
        self.steps, self.terms, self.transcript = steps, terms, transcript

    async def answer(self, step: PlanStep | None, shape: Turns) -> Answered:
        parts: list[str] = []
        seq = 0
        for count in range(1, self.terms.limits.max_turns_per_step + 1):
            taken = self.steps.count_turn(step) if step is not None else count
            turn = await self.turns.take(
                shape.label(taken),
                shape.tools,
                preview_chars=shape.preview_chars,
                answer_chars=shape.answer_chars,
                stream=shape.stream,
                context_from=shape.context_from,
            )
            seq = turn.seq
            if turn.tool_calls and shape.tools and step is not None:
                parts = []
                done: str | None = None
                for call in turn.tool_calls:
                    summary = await self.tools.handle(step, call, turn.content_preview)
                    done = summary if summary is not None else done
                if done is not None and shape.complete_step_ends:
                    return Answered(done, seq)  # the summary `complete_step` gave
                continue
            parts = [*parts, turn.content_preview] if shape.joins_parts else [turn.content_preview]
            if self.turns.cut_short(turn):
                reason = turn.finish_reason or "?"
                self.transcript.queue_message("user", shape.cut_short.format(reason=reason))
                continue
            if shape.only_complete_step_ends:
                self.transcript.queue_message("user", prompts.END_WITH_COMPLETE_STEP)
                continue
            return Answered(" ".join(part for part in parts if part), seq)
        if shape.gives_up is not None:
            raise RunFailed(shape.gives_up)
        return Answered(" ".join(part for part in parts if part), seq)
