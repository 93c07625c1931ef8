"""The `call_model` activity: one chat completion, memoized by (run, seq, request).

The client never retries by itself; Temporal does, with our classification: requests
the endpoint refused (400/401/403/404/422) fail at once, the rest retry, and a
Retry-After header becomes the next retry's delay.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import openai
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import observe
from activities.fingerprints import fingerprint
from activities.heartbeat import heartbeating
from activities.sql import store_call
from activities.stores import Stores
from worker.settings import Settings
from workflows.catalog import tool_spec
from workflows.contracts import ModelCallInput, ModelTurn, TokenUsage, ToolCall, preview
from workflows.prompts import SYSTEM_PROMPT

# Every other 4xx is the endpoint refusing the request: retrying would not change it.
RETRYABLE_STATUS = {408, 409, 429}


class ModelActivities:
    def __init__(self, settings: Settings, stores: Stores) -> None:
        self.settings = settings
        self.stores = stores
        # The key is read here, in the worker, from its own environment: never from a
        # workflow input, so it cannot reach the history (invariant 7).
        self.client = openai.AsyncOpenAI(
            base_url=settings.model_base_url,
            api_key=settings.model_api_key,
            max_retries=0,
        )

    @activity.defn(name="call_model")
    async def call_model(self, call: ModelCallInput) -> ModelTurn:
        async with heartbeating():
            return await self._call_model(call)

    async def _call_model(self, call: ModelCallInput) -> ModelTurn:
        provider = "offline" if self.settings.uses_offline_model else "openai"
        with observe.model_span(call, provider, self.settings.effective_model_name) as span:
            turn = await self._answer(call)
            observe.finish_model_span(span, turn)
        observe.count_model_usage(turn)
        return turn

    async def _answer(self, call: ModelCallInput) -> ModelTurn:
        request, digest, stored = await store_call(self.stores.db, self._prepare, call)
        if stored is not None:
            return _turn(call, stored, memoized=True)
        transcript = self.stores.transcript
        response = await self._complete(call, request)
        message = response["choices"][0]["message"]
        await store_call(
            self.stores.db,
            transcript.remember,
            call.run_id,
            call.reply_seq,
            digest,
            response,
            _assistant(message),
        )
        return _turn(call, response, memoized=False, settings=self.settings)

    def _prepare(self, call: ModelCallInput) -> tuple[dict[str, Any], str, dict[str, Any] | None]:
        """Store the appended messages, build the request from the store, and look for an
        answer already given to it: (request, fingerprint, stored answer or None)."""
        transcript = self.stores.transcript
        appended = [(m.seq, _as_openai_message(m.model_dump())) for m in call.append]
        transcript.put_many(call.run_id, appended)
        history = transcript.read(call.run_id, call.reply_seq, window_from=call.context_from_seq)
        request = self._request(call, history)
        digest = fingerprint(request)
        return request, digest, transcript.recall(call.run_id, call.reply_seq, digest)

    def _request(self, call: ModelCallInput, history: list[dict[str, Any]]) -> dict[str, Any]:
        messages = [clip_for_model(message) for message in history]
        request: dict[str, Any] = {
            "model": self.settings.effective_model_name,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, *messages],
        }
        specs = [spec for name in call.tools if (spec := tool_spec(name)) is not None]
        if specs:
            request["tools"] = [spec.openai_schema() for spec in specs]
            if call.force_tool:
                request["tool_choice"] = {"type": "function", "function": {"name": call.force_tool}}
        return request

    async def _complete(self, call: ModelCallInput, request: dict[str, Any]) -> dict[str, Any]:
        headers = {}
        if call.scenario:  # only the offline model reads these; real endpoints ignore them
            headers = {
                "X-Scenario": call.scenario,
                "X-Agent-Run": call.run_id,
                "X-Agent-Seq": str(call.reply_seq),
            }
        try:
            # The openai client's own POST, its JSON kept as JSON: `create` walks every
            # message to transform it and builds a typed reply we would only dump again,
            # and together they were a fifth of the worker's CPU per step.
            response: dict[str, Any] = await self.client.post(
                "/chat/completions",
                cast_to=dict[str, Any],
                body=request,
                options={"headers": headers, "timeout": _seconds_left()},
            )
        except openai.APIStatusError as err:
            raise _classify(err) from err
        except (openai.APITimeoutError, openai.APIConnectionError) as err:
            raise ApplicationError(
                f"model endpoint {self.settings.model_base_url} unreachable: {err}",
                type="ModelUnavailable",
            ) from err
        choices = response.get("choices") if isinstance(response, dict) else None
        if not choices or not isinstance(choices[0].get("message"), dict):
            raise ApplicationError("model answered with no choices", type="ModelBadResponse")
        return response


def _classify(err: openai.APIStatusError) -> ApplicationError:
    status = err.status_code
    detail = preview(str(err.message), 300)
    if 400 <= status < 500 and status not in RETRYABLE_STATUS:
        return ApplicationError(
            f"model endpoint refused the request (HTTP {status}): {detail}",
            type="ModelRequestRejected",
            non_retryable=True,
        )
    delay = _retry_after(err.response.headers.get("retry-after"))
    return ApplicationError(
        f"model endpoint busy or failing (HTTP {status}): {detail}",
        type="ModelUnavailable",
        next_retry_delay=timedelta(seconds=delay) if delay is not None else None,
    )


def _seconds_left() -> float | None:
    """The HTTP timeout: what remains of the activity's start-to-close timeout."""
    timeout = activity.info().start_to_close_timeout
    return timeout.total_seconds() if timeout else None


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


# A message longer than this goes to the model clipped, with a note; the transcript keeps
# it whole. A 10 MB tool result is stored, not sent: no model takes it, no payload nears it.
MODEL_MESSAGE_CHARS = 100_000
# Tool-call arguments longer than this are not carried into the workflow's history.
INLINE_ARGUMENT_CHARS = 32_000


def clip_for_model(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, str) or len(content) <= MODEL_MESSAGE_CHARS:
        return message
    note = (
        f"\n[clipped: {len(content):,} characters in all; the whole text is kept in the "
        "run's transcript store]"
    )
    return message | {"content": content[:MODEL_MESSAGE_CHARS] + note}


def _as_openai_message(message: dict[str, Any]) -> dict[str, Any]:
    out = {"role": message["role"], "content": message["content"]}
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out


def _assistant(message: dict[str, Any]) -> dict[str, Any]:
    """The reply as it goes back to the model on the next turn."""
    out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    return out


def _tool_call(raw: dict[str, Any]) -> ToolCall:
    arguments = raw["function"].get("arguments") or ""
    if len(arguments) > INLINE_ARGUMENT_CHARS:
        # Kept whole in the transcript; the workflow only hears that it was too large.
        return ToolCall(
            id=raw["id"], name=raw["function"]["name"], arguments="", oversized=len(arguments)
        )
    return ToolCall(id=raw["id"], name=raw["function"]["name"], arguments=arguments)


def _turn(
    call: ModelCallInput,
    response: dict[str, Any],
    *,
    memoized: bool,
    settings: Settings | None = None,
) -> ModelTurn:
    choice = response["choices"][0]
    message = choice["message"]
    usage = response.get("usage") or {}
    input_tokens = int(usage.get("prompt_tokens", 0))
    output_tokens = int(usage.get("completion_tokens", 0))
    cost = 0.0
    if settings is not None:
        cost = (
            input_tokens * settings.price_input_per_mtok
            + output_tokens * settings.price_output_per_mtok
        ) / 1_000_000
    calls = [_tool_call(c) for c in message.get("tool_calls") or []]
    return ModelTurn(
        seq=call.reply_seq,
        content_preview=preview(
            message.get("content"), call.preview_chars, single_line=call.preview_chars <= 200
        ),
        tool_calls=calls,
        finish_reason=choice.get("finish_reason"),
        model=str(response.get("model", "")),
        # A memoized answer spent no tokens now: it was paid for when first given.
        usage=TokenUsage()
        if memoized
        else TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost),
        memoized=memoized,
    )
