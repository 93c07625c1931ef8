"""The `run_tool` activity: one tool call, exactly once, however often it is attempted.

For a side effect: the ledger answers a key it has seen; otherwise the provider is
called with the key (it honours it too), then the ledger records the result. A crash
at any instant between those steps ends, after the retry, in exactly one effect.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import observe
from activities.crash_points import CrashPoints
from activities.heartbeat import finish_even_if_cancelled, heartbeating
from activities.ledger import IdempotencyConflict, fingerprint
from activities.providers.base import ProviderConflict
from activities.stores import Stores
from workflows.catalog import ToolArgs, ToolRisk, ToolSpec, tool_spec
from workflows.contracts import ToolCallInput, ToolOutcome, preview

# Which provider operation each side-effecting tool is.
EFFECTS: dict[str, tuple[str, str]] = {
    "pay_invoice": ("payments", "charge"),
    "issue_refund": ("payments", "refund"),
    "draft_email": ("email", "draft"),
    "send_email": ("email", "send"),
    "record_progress": ("records", "note"),
}


class ToolActivities:
    def __init__(self, stores: Stores, crash_points: CrashPoints) -> None:
        self.stores = stores
        self.crash_points = crash_points

    @activity.defn(name="run_tool")
    async def run_tool(self, call: ToolCallInput) -> ToolOutcome:
        with observe.tool_span(call) as span:
            async with heartbeating():
                outcome = await finish_even_if_cancelled(asyncio.to_thread(self._run, call))
            observe.finish_tool_span(span, outcome)
        observe.count_effect(call, outcome)
        return outcome

    def _run(self, call: ToolCallInput) -> ToolOutcome:
        spec, args = _validated(call)
        replayed = False
        if spec.risk is ToolRisk.READ_ONLY:
            result = self._read(call.name, args)
        else:
            result, replayed = self._effect_once(call)
        text = render(result)
        message = {"role": "tool", "tool_call_id": call.tool_call_id, "content": text}
        self.stores.transcript.put(call.run_id, call.result_seq, message)
        return ToolOutcome(
            ok=bool(result.get("ok", True)),
            summary=preview(text),
            result_seq=call.result_seq,
            replayed_from_ledger=replayed,
        )

    def _read(self, name: str, args: Any) -> dict[str, Any]:
        if name == "lookup_invoice":
            return self.stores.providers.payments.lookup(args.invoice_id)
        if name == "fetch_report":
            return {"ok": True, "report_id": args.report_id, "text": report_text(args.size_bytes)}
        raise ApplicationError(f"no reader for tool {name!r}", non_retryable=True)

    def _effect_once(self, call: ToolCallInput) -> tuple[dict[str, Any], bool]:
        key = call.idempotency_key
        if call.name not in EFFECTS:
            raise ApplicationError(f"no provider acts for {call.name!r}", non_retryable=True)
        if not key:
            raise ApplicationError(
                f"{call.name} has side effects and needs an idempotency key", non_retryable=True
            )
        digest = fingerprint(call.name, call.arguments)
        ledger, crash = self.stores.ledger, self.crash_points
        try:
            recorded = ledger.recorded(key, call.name, digest)
            if recorded is not None:
                return recorded, True
            crash.reached("before_provider", call.name, key)
            provider_name, operation = EFFECTS[call.name]
            provider = self.stores.providers.by_name(provider_name)
            result = provider.call(key, operation, call.arguments, call.run_id)
            crash.reached("after_provider", call.name, key)
            stored = ledger.record(key, call.run_id, call.name, digest, result)
            crash.reached("after_ledger", call.name, key)
            return stored, False
        except (IdempotencyConflict, ProviderConflict) as err:
            raise ApplicationError(
                str(err), type="IdempotencyConflict", non_retryable=True
            ) from err


def _validated(call: ToolCallInput) -> tuple[ToolSpec, ToolArgs]:
    spec = tool_spec(call.name)
    if spec is None or spec.internal:
        raise ApplicationError(f"no tool named {call.name!r}", non_retryable=True)
    try:
        return spec, spec.args_model.model_validate(call.arguments)
    except ValidationError as err:
        raise ApplicationError(
            f"{call.name}: invalid arguments reached the tool: {err}", non_retryable=True
        ) from err


def render(result: dict[str, Any]) -> str:
    """The text the model reads as the tool's result."""
    return json.dumps(result, sort_keys=True, default=str)


def report_text(size: int) -> str:
    """A deterministic report of exactly `size` characters (the demo's large document)."""
    line = "quarterly figures: revenue, costs, margins, forecasts and risks.\n"
    return (line * (size // len(line) + 1))[:size]
