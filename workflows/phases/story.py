"""The run's story: plan, then each step's model turns until the step is done, then the
final answer; or a plain tool loop. Between steps, a long run continues as new."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from durable_agents.workflows import prompts
    from durable_agents.workflows.contract_base import preview
    from durable_agents.workflows.contracts import RunLimits
    from durable_agents.workflows.event_kinds import EventKind
    from durable_agents.workflows.output import output_record, parsed, schema_text
    from durable_agents.workflows.records import FINAL_ANSWER_CHARS, PlanStep
    from durable_agents.workflows.registry import AgentUnavailable
    from durable_agents.workflows.state.audit_log import AuditLog
    from durable_agents.workflows.state.lifecycle import Lifecycle
    from durable_agents.workflows.state.origin import Origin
    from durable_agents.workflows.state.steps import Steps
    from durable_agents.workflows.state.terms import Terms
    from durable_agents.workflows.state.transcript import Transcript
    from durable_agents.workflows.tools import (
        SUBMIT_PLAN,
        SubmitPlanArgs,
    )


from durable_agents.workflows.phases.context import Phase, RunContext, RunFailed
from durable_agents.workflows.phases.turn_loop import TurnLoop, Turns

PLAN_TOOLS: tuple[str, ...] = (SUBMIT_PLAN,)


class Story(Phase):
    """A run that is not a conversation: its plan and steps, or its plain loop."""

    def __init__(
        self,
        ctx: RunContext,
        loop: TurnLoop,
        *,
        audit_log: AuditLog,
        lifecycle: Lifecycle,
        origin: Origin,
        steps: Steps,
        terms: Terms,
        transcript: Transcript,
    ) -> None:
        super().__init__(ctx)
        self.loop = loop
        self.audit_log, self.lifecycle, self.origin = audit_log, lifecycle, origin
        self.steps, self.terms, self.transcript = steps, terms, transcript

    async def tell(self) -> str:
        if not self.ctx.agent.planning:
            return await self._answer_in_shape(await self._loop())
        if not self.steps.plan:  # a fork made after planning keeps its plan
            await self._plan()
        while (step := self.steps.next_step()) is not None:
            await self._continue_as_new_if_due()
            await self._run_step(step)
        return await self._answer_in_shape(await self._final_answer())

    def _shape_message(self) -> str:
        """What the model is told of the answer's declared type ("" when it is free text)."""
        declared = self.ctx.agent.output
        if declared is None:
            return ""
        return prompts.answer_shape(declared.name, schema_text(self._output_type()))

    def _output_type(self) -> type[BaseModel]:
        """The worker's answer type, checked against the one the run recorded."""
        declared = self.ctx.agent.output
        code = self.ctx.agent_code().output_type
        # The type itself, not how many answers this build would ask for (the run asks
        # for what it recorded).
        made = output_record(code) if code is not None else None
        kept = (declared.name, declared.schema_digest) if declared is not None else None
        if code is None or made is None or (made.name, made.schema_digest) != kept:
            raise AgentUnavailable(
                f"this worker's agent {self.ctx.agent.name!r} declares another answer type than "
                "when the run started; the run waits for a worker with the type as it was"
            )
        return code

    async def _answer_in_shape(self, answer: str) -> str:
        """The answer, validated against the agent's declared type (workflows/output.py):
        a reply out of shape goes back to the model with the error, a bounded number of
        times; the parsed answer is kept in the state."""
        declared = self.ctx.agent.output
        if declared is None:
            return answer
        output_type = self._output_type()
        for attempt in range(1, declared.attempts + 1):
            value, error = parsed(output_type, answer, FINAL_ANSWER_CHARS)
            if value is not None:
                self.lifecycle.keep_output(value)
                return answer
            if attempt == declared.attempts:
                break
            self.transcript.queue_message("user", prompts.answer_again(declared.name, error))
            turn = await self.loop.turns.take(
                f"answer again {attempt}", (), preview_chars=FINAL_ANSWER_CHARS
            )
            answer = turn.content_preview
        raise RunFailed(
            f"the agent never gave a valid {declared.name} in {declared.attempts} answers: {error}"
        )

    async def _continue_as_new_if_due(self) -> None:
        """Between steps, when the history has grown long, go on in a fresh run with the same
        id, carrying the state: a run of any length stays under Temporal's history limits."""
        if history_is_long(self.terms.limits):
            await self.continue_as_new(workflow.info().get_current_history_length())

    async def continue_as_new(self, length: int) -> None:
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self.ctx.signals_sent()
        self.audit_log.log(workflow.now(), "system", "continued_as_new", f"after {length} events")
        self.ctx.moment(
            EventKind.CONTINUED_AS_NEW, f"run {self.origin.chain} ended after {length} events"
        )
        workflow.continue_as_new(self.ctx.continued_request())

    async def _plan(self) -> None:
        self.transcript.begin_phase()
        self.transcript.queue_message("user", prompts.goal_message(self.terms.goal))
        for _ in range(self.terms.limits.max_plan_attempts):
            turn = await self.loop.turns.take("plan", PLAN_TOOLS, force_tool=SUBMIT_PLAN)
            plan: SubmitPlanArgs | None = None
            for call in turn.tool_calls:
                valid = self.loop.tools.validated_call(call, allowed=PLAN_TOOLS)
                args = valid[2] if valid is not None else None
                if isinstance(args, SubmitPlanArgs) and plan is None:
                    plan = args
                    self.transcript.queue_message("tool", prompts.PLAN_ACCEPTED, call.id)
                elif args is not None:
                    self.transcript.queue_message("tool", "error: one plan only", call.id)
            if plan is not None:
                self.steps.set_plan(plan.steps, workflow.now())
                return
            if not turn.tool_calls:
                self.transcript.queue_message("user", f"Call {SUBMIT_PLAN} with your plan.")
        raise RunFailed(
            f"the model gave no valid plan in {self.terms.limits.max_plan_attempts} attempts"
        )

    def open_step(self, step: PlanStep, instruction: str, speaker: str | None = None) -> None:
        """A step begins: its phase of the transcript starts with the instruction (a
        conversation's: the person's message, with who wrote it)."""
        self.steps.start_step(step, workflow.now())
        self.ctx.publish()
        self.transcript.begin_phase()
        self.transcript.flush_notes()
        self.transcript.queue_message("user", instruction, speaker=speaker)

    async def _run_step(self, step: PlanStep) -> None:
        self.open_step(step, prompts.step_message(step.index, len(self.steps.plan), step.title))
        limit = self.terms.limits.max_turns_per_step
        shape = Turns(
            label=lambda _: f"step {step.index}",
            tools=self.ctx.step_tools(),
            cut_short=prompts.CUT_SHORT,
            joins_parts=False,
            only_complete_step_ends=self.terms.limits.steps_end == "complete_step",
            complete_step_ends=True,
            gives_up=f"step {step.index} did not finish within {limit} model turns",
        )
        done = await self.loop.answer(step, shape)
        self.steps.complete_step(step, done.text, workflow.now())

    async def _loop(self) -> str:
        """A plain tool loop: the goal, then model turns until a reply calls no tool. It is
        one step of the run's plan, so state, forks and the console read it like any."""
        if not self.steps.plan:
            self.steps.set_plan([prompts.LOOP_STEP_TITLE], workflow.now())
        step = self.steps.next_step()
        if step is None:  # a fork of a finished loop
            return self.lifecycle.final_answer or ""
        self.open_step(step, prompts.task_message(self.terms.goal) + self._shape_message())
        limit = self.terms.limits.max_turns_per_step
        shape = Turns(
            label=lambda turn: f"turn {turn}",
            tools=self.ctx.step_tools(),
            answer_chars=FINAL_ANSWER_CHARS,
            gives_up=f"the agent gave no answer within {limit} model turns",
        )
        answer = (await self.loop.answer(step, shape)).text
        self.steps.complete_step(step, preview(answer), workflow.now())
        return answer

    async def _final_answer(self) -> str:
        self.transcript.begin_phase()
        self.transcript.flush_notes()
        recap = self.steps.context if self.terms.limits.context == "step" else []
        self.transcript.queue_message("user", prompts.final_message(recap) + self._shape_message())
        shape = Turns(label=lambda _: "final answer", preview_chars=FINAL_ANSWER_CHARS)
        return (await self.loop.answer(None, shape)).text


def history_is_long(limits: RunLimits) -> bool:
    """The one test of when a run goes on in a fresh run of its chain (between a story's
    steps, between a conversation's turns): Temporal suggests it, or the history reached
    the run's own limit (`continue_as_new_after_events`)."""
    info = workflow.info()
    limit = limits.continue_as_new_after_events
    return info.is_continue_as_new_suggested() or (
        limit is not None and info.get_current_history_length() >= limit
    )
