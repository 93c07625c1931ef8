"""The `run_tool` activity: validate, run once under the idempotency key, record the result."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.demo_tools import IMPLEMENTATIONS, EffectContext, render
from activities.heartbeat import finish_even_if_cancelled, heartbeating
from activities.ledger import IdempotencyConflict
from activities.stores import Stores
from workflows.catalog import ToolRisk, tool_spec
from workflows.contracts import ToolCallInput, ToolOutcome, preview


class ToolActivities:
    def __init__(self, stores: Stores) -> None:
        self.stores = stores

    @activity.defn(name="run_tool")
    async def run_tool(self, call: ToolCallInput) -> ToolOutcome:
        async with heartbeating():
            return await finish_even_if_cancelled(asyncio.to_thread(self._run, call))

    def _run(self, call: ToolCallInput) -> ToolOutcome:
        spec = tool_spec(call.name)
        implementation = IMPLEMENTATIONS.get(call.name)
        if spec is None or implementation is None or spec.internal:
            raise ApplicationError(f"no tool named {call.name!r}", non_retryable=True)
        try:
            args = spec.args_model.model_validate(call.arguments)
        except ValidationError as err:
            raise ApplicationError(
                f"{call.name}: invalid arguments reached the tool: {err}", non_retryable=True
            ) from err
        replayed = False
        if spec.risk is ToolRisk.READ_ONLY:
            with self.stores.db.connect() as conn:
                result = implementation(EffectContext(conn, call.run_id, None), args)
        else:
            if not call.idempotency_key:
                raise ApplicationError(
                    f"{call.name} has side effects and needs an idempotency key",
                    non_retryable=True,
                )
            result, replayed = self._once(call, implementation, args)
        text = render(result)
        message: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": call.tool_call_id,
            "content": text,
        }
        self.stores.transcript.put(call.run_id, call.result_seq, message)
        return ToolOutcome(
            ok=bool(result.get("ok", True)),
            summary=preview(text),
            result_seq=call.result_seq,
            replayed_from_ledger=replayed,
        )

    def _once(
        self, call: ToolCallInput, implementation: Any, args: Any
    ) -> tuple[dict[str, Any], bool]:
        key = call.idempotency_key or ""
        try:
            return self.stores.ledger.run_once(
                key,
                call.run_id,
                call.name,
                call.arguments,
                lambda conn: implementation(EffectContext(conn, call.run_id, key), args),
            )
        except IdempotencyConflict as err:
            raise ApplicationError(
                str(err), type="IdempotencyConflict", non_retryable=True
            ) from err
