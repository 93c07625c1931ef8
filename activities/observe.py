"""What the activities tell the outside: a span per model and tool call (OpenTelemetry's
GenAI conventions) and counters of tokens, cost and effects on the worker's metrics."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.trace import Span, Status, StatusCode
from temporalio import activity

from durable_agents.runtime import telemetry
from durable_agents.workflows.activity_io import (
    ModelCallInput,
    ModelTurn,
    ToolCallInput,
    ToolOutcome,
)


@contextmanager
def model_span(call: ModelCallInput, provider: str, request_model: str) -> Iterator[Span]:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": provider,
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": request_model,
        "agent.run_id": call.run_id,
        "agent.seq": call.reply_seq,
        "agent.label": call.label,
    }
    with telemetry.span(f"chat {request_model}", attributes) as span:
        yield span


def finish_model_span(span: Span, turn: ModelTurn) -> None:
    span.set_attributes(
        {
            "gen_ai.response.model": turn.model,
            "gen_ai.usage.input_tokens": turn.usage.input_tokens,
            "gen_ai.usage.output_tokens": turn.usage.output_tokens,
            "gen_ai.response.finish_reasons": [turn.finish_reason or "unknown"],
            "agent.memoized": turn.memoized,
        }
    )


def count_model_usage(turn: ModelTurn) -> None:
    """Tokens and cost spent now (a memoized answer spent none)."""
    if turn.memoized:
        return
    meter = activity.metric_meter().with_additional_attributes({"model": turn.model})
    tokens = meter.create_counter("durable_agents_model_tokens", "Model tokens spent", "tokens")
    tokens.add(turn.usage.input_tokens, {"direction": "input"})
    tokens.add(turn.usage.output_tokens, {"direction": "output"})
    cost = meter.create_counter(
        "durable_agents_model_cost_microusd", "Model cost in millionths of a US dollar"
    )
    cost.add(round(turn.usage.cost_usd * 1_000_000))


@contextmanager
def tool_span(call: ToolCallInput, risk: str) -> Iterator[Span]:
    attributes: dict[str, str | int] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.tool_call_id,
        "agent.tool.risk": risk,
        "agent.run_id": call.run_id,
        "agent.step": call.step,
    }
    if call.key:
        attributes["agent.tool.idempotency_key"] = call.key
    with telemetry.span(f"execute_tool {call.name}", attributes) as span:
        try:
            yield span
        except BaseException:
            span.set_attribute("agent.tool.outcome", "error")
            raise


def finish_tool_span(span: Span, outcome: ToolOutcome) -> None:
    result = "ok" if outcome.ok else "failed"
    if outcome.replayed_from_ledger:
        result = "replayed"
    span.set_attribute("agent.tool.outcome", result)
    if not outcome.ok:
        span.set_status(Status(StatusCode.ERROR, "the tool reported a failure"))


def count_effect(call: ToolCallInput, outcome: ToolOutcome) -> None:
    """An effect performed now: not one answered from the ledger (performed before), nor
    one the provider refused (nothing happened)."""
    if call.key is None or outcome.replayed_from_ledger or not outcome.ok:
        return
    meter = activity.metric_meter()
    effects = meter.create_counter("durable_agents_effects", "Side effects performed", "effects")
    effects.add(1, {"tool": call.name})
