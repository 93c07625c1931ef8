"""One tool call the model asked for: its arguments validated (finite numbers, the tool's
model), gated (rules, risk, policy), within the budget, then run as an activity with an
idempotency key made in the workflow; a tool that fails for good is the model's to hear."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
)

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from durable_agents.workflows import patches, prompts, whatif
    from durable_agents.workflows.activity_io import ToolCall, ToolCallInput, ToolOutcome
    from durable_agents.workflows.activity_options import (
        CALL_MCP_TOOL,
        RUN_TOOL,
        tool_call,
    )
    from durable_agents.workflows.agent_records import ToolRecord
    from durable_agents.workflows.agents import DelegateArgs
    from durable_agents.workflows.contracts import EffectSummary
    from durable_agents.workflows.event_kinds import EventKind
    from durable_agents.workflows.memory import MEMORY_TOOLS
    from durable_agents.workflows.policy import approval_rule, idempotency_key
    from durable_agents.workflows.records import ApprovalStatus, PlanStep
    from durable_agents.workflows.state.budget_book import BudgetBook
    from durable_agents.workflows.state.origin import Origin
    from durable_agents.workflows.state.outcomes import ToolOutcomes
    from durable_agents.workflows.state.terms import Terms
    from durable_agents.workflows.state.thread import Thread
    from durable_agents.workflows.state.transcript import Transcript
    from durable_agents.workflows.tools import (
        INTERNAL_TOOLS,
        AskHumanArgs,
        CompleteStepArgs,
        Tool,
    )


from durable_agents.workflows.phases.activity_call import call_activity
from durable_agents.workflows.phases.budget import Budget
from durable_agents.workflows.phases.context import (
    Phase,
    RunContext,
    failure_reason,
)
from durable_agents.workflows.phases.delegating import Delegating
from durable_agents.workflows.phases.gate import Gate
from durable_agents.workflows.phases.inputs import describe

# A tool call the workflow may run: the worker's tool, the run's record of it (None for a
# built-in tool) and the validated arguments.
ValidCall = tuple[Tool, ToolRecord | None, BaseModel]


class ToolCalls(Phase):
    """The model's tool calls: validated, gated, within the budget, then run."""

    def __init__(
        self,
        ctx: RunContext,
        budget: Budget,
        gate: Gate,
        delegation: Delegating,
        *,
        book: BudgetBook,
        origin: Origin,
        outcomes: ToolOutcomes,
        terms: Terms,
        thread: Thread,
        transcript: Transcript,
    ) -> None:
        super().__init__(ctx)
        self.budget, self.gate, self.delegation = budget, gate, delegation
        self.book, self.origin, self.outcomes = book, origin, outcomes
        self.terms, self.thread, self.transcript = terms, thread, transcript

    def _tool(self, name: str) -> tuple[Tool, ToolRecord | None] | None:
        """The worker's tool for a name the run may call, checked against the record."""
        if name in INTERNAL_TOOLS:
            return INTERNAL_TOOLS[name], None
        record = self.ctx.agent.tool(name)
        if record is None:
            return None
        return self.ctx.registry().tool_for(record, self.ctx.agent.name), record

    def validated_call(self, call: ToolCall, *, allowed: tuple[str, ...]) -> ValidCall | None:
        """The tool called, its record and the model's arguments, validated; on error, tell
        the model and return None."""
        found = self._tool(call.name) if call.name in allowed else None
        if found is None:
            text = prompts.unknown_tool(call.name, list(allowed))
            self.transcript.queue_message("tool", text, call.id)
            return None
        spec, record = found
        if call.oversized is not None:
            text = prompts.argument_error(spec.name, f"{call.oversized:,} characters is too long")
            self.transcript.queue_message("tool", text, call.id)
            return None
        try:
            raw = json.loads(
                call.arguments or "{}", parse_constant=_no_constant, parse_float=_finite_float
            )
            if not isinstance(raw, dict):
                raise ValueError("arguments must be a JSON object")
            args = spec.args_model.model_validate(raw)
            if (where := _non_finite(args.model_dump())) is not None:
                raise ValueError(f"{where}: a number must be finite (not NaN or infinite)")
            return spec, record, args
        except (ValueError, ValidationError) as err:
            text = prompts.argument_error(spec.name, describe(err))
            self.transcript.queue_message("tool", text, call.id)
            return None

    async def handle(self, step: PlanStep, call: ToolCall, reason: str) -> str | None:
        """Gate and run one tool call. Returns the summary when the call ends the step."""
        valid = self.validated_call(call, allowed=self.ctx.step_tools())
        if valid is None:
            return None
        spec, record, args = valid
        if isinstance(args, CompleteStepArgs):
            self.transcript.queue_message("tool", prompts.STEP_MARKED_DONE, call.id)
            return args.summary
        if isinstance(args, AskHumanArgs):
            await self.gate.ask_human(step, call, args)
            return None
        if record is None:  # a built-in tool the workflow handles, none left here
            return None
        rule = approval_rule(record, args, self.terms.policy, self.book.usage.cost_usd)
        verdict = await self.gate.rules_verdict(step, record, args)
        if verdict is not None and verdict.decision == "deny":
            text = prompts.denied(spec.name, verdict.rule, verdict.reason)
            self.transcript.queue_message("tool", text, call.id)
            self.ctx.moment(EventKind.DENIED_BY_RULE, f"{spec.name} ({verdict.rule})")
            return None
        if rule is None and verdict is not None and verdict.decision == "ask":
            rule = f"rule {verdict.rule}: {verdict.reason}"
        if rule is not None:
            request = await self.gate.await_approval(step, call, spec, args, reason, rule)
            if request.status is not ApprovalStatus.APPROVED:
                text = prompts.rejected(spec.name, request.decided_by or "?", request.comment)
                self.transcript.queue_message("tool", text, call.id)
                return None
        await self.ctx.pause_point()
        await self.budget.within("delegate" if spec.delegate_to else "tool")
        if spec.delegate_to is not None and isinstance(args, DelegateArgs):
            await self.delegation.delegate(step, call, spec, args)
        else:
            await self._run_tool(step, call, spec, args, record)
        return None

    async def _run_tool(
        self, step: PlanStep, call: ToolCall, spec: Tool, args: BaseModel, record: ToolRecord
    ) -> None:
        key = None
        call_key = self.thread.call_key(call.id)
        if spec.risk.has_effects:
            key = idempotency_key(self.origin.store_key, step.index, call_key)
        # The activity derives the usual key itself; a conversation's (its message in it)
        # is sent whole.
        derived = key is not None and call_key == call.id
        memory = spec.name in MEMORY_TOOLS and self.terms.memory_namespace is not None
        tool_input = ToolCallInput(
            run_id=self.ctx.run_named(),
            step=step.index,
            tool_call_id=call.id,
            name=spec.name,
            arguments=args.model_dump(mode="json"),
            result_seq=self.transcript.take_seq(),
            side_effect=derived or None,
            idempotency_key=None if derived else key,
            namespace=self.terms.memory_namespace if memory else None,
            agent=self.ctx.agent.name if record.mcp or memory else None,
            mcp=record.mcp,
            mcp_name=record.mcp_name,
            **whatif.tool_call_inputs(self.origin.shadow),
            # A worker whose store lacks the run's past runs no tool (activities/store_holds.py).
            rows_written=self.transcript.transcript_rows,
        )
        self.book.count_tool_call()
        self.ctx.moment(
            EventKind.TOOL, f"{spec.name} (seq {tool_input.result_seq})", tool_input.result_seq
        )
        try:
            outcome = await call_activity(
                CALL_MCP_TOOL if record.mcp else RUN_TOOL,
                tool_input,
                result=ToolOutcome,
                summary=f"tool: {spec.name}",
                options=tool_call(self.terms.limits, spec.timeout, spec.retry),
            )
        except ActivityError as err:
            if not workflow.patched(patches.TOOL_ERRORS):
                raise
            self.ctx.report_spend()
            # The tool failed for good: the model hears why; the run goes on.
            text = prompts.tool_failed(spec.name, failure_reason(err))
            self.outcomes.tell(
                step.index, call.id, spec.name, ok=False, text=text, now=workflow.now(),
                seq=tool_input.result_seq,
            )  # fmt: skip
            self.ctx.moment(EventKind.TOOL_FAILED, spec.name)
            return
        self.transcript.note_written(1)  # its result, at result_seq
        if key is not None:  # the ledger's recorded result for this key: what really happened
            effect = EffectSummary(tool=spec.name, idempotency_key=key, ok=outcome.ok)
            self.outcomes.record_effect(effect)
        self.outcomes.record(
            step.index, call.id, spec.name, ok=outcome.ok, summary=outcome.summary,
            seq=outcome.result_seq, now=workflow.now(),
        )  # fmt: skip
        self.ctx.report_spend()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a tool takes")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large a number")
    return value


def _non_finite(value: Any, where: str = "arguments") -> str | None:
    """Where a validated argument holds NaN or an infinity (a string "NaN" makes one):
    compared with a payment threshold, it would slip past it or fail the run."""
    if isinstance(value, float | Decimal):
        return None if math.isfinite(value) else where
    if isinstance(value, dict):
        items: list[tuple[str, Any]] = [(f"{where}.{k}", v) for k, v in value.items()]
    elif isinstance(value, list | tuple):
        items = [(f"{where}.{i}", v) for i, v in enumerate(value)]
    else:
        return None
    for path, item in items:
        if (found := _non_finite(item, path)) is not None:
            return found
    return None
