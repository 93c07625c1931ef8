"""The OpenAI-compatible chat-completions client: the one module that knows the wire
format (tool schemas as functions, tool calls as `function` objects, `choices`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai

from durable_agents.activities.model_client import (
    CallMeta,
    ModelRefused,
    ModelReply,
    ModelRequest,
    ModelUnavailable,
    RawToolCall,
)
from durable_agents.activities.openai_stream import collect
from durable_agents.workflows.contract_base import preview

# Every other 4xx is the endpoint refusing the request: retrying would not change it.
RETRYABLE_STATUS = {408, 409, 429}


class OpenAIChatClient:
    """`run_headers`: send the run's label, id and sequence number as headers, which the
    offline model plays its scenario from; a third-party endpoint gets them only when
    AGENT_MODEL_RUN_HEADERS says so (a gateway that logs per run, say)."""

    def __init__(self, base_url: str, api_key: str, *, run_headers: bool = False) -> None:
        self.base_url = base_url
        self.run_headers = run_headers
        self.client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)

    async def complete(self, request: ModelRequest, meta: CallMeta) -> ModelReply:
        headers = self._headers(meta)
        try:
            # The openai client's own POST, its JSON kept as JSON: `create` walks every
            # message to transform it and builds a typed reply we would only dump again,
            # and together they were a fifth of the worker's CPU per step.
            response: dict[str, Any] = await self.client.post(
                "/chat/completions",
                cast_to=dict[str, Any],
                body=wire_request(request),
                options={"headers": headers, "timeout": meta.timeout_seconds},
            )
        except openai.APIStatusError as err:
            raise _classify(err) from err
        except (openai.APITimeoutError, openai.APIConnectionError) as err:
            raise ModelUnavailable(f"model endpoint {self.base_url} unreachable: {err}") from err
        return reply_from_wire(response)

    async def stream(
        self, request: ModelRequest, meta: CallMeta, deltas: Callable[[str], None]
    ) -> ModelReply:
        """The same call, streamed: each piece of text goes to `deltas` as it arrives."""
        try:
            chunks = await self.client.chat.completions.create(
                **wire_request(request),
                stream=True,
                stream_options={"include_usage": True},
                extra_headers=self._headers(meta),
                timeout=meta.timeout_seconds,
            )
            async with chunks:
                return await collect(chunks, deltas)
        except openai.APIStatusError as err:
            raise _classify(err) from err
        except (openai.APITimeoutError, openai.APIConnectionError) as err:
            raise ModelUnavailable(f"model endpoint {self.base_url} unreachable: {err}") from err

    def _headers(self, meta: CallMeta) -> dict[str, str]:
        headers: dict[str, str] = {}
        # A header carries printable ASCII only: a label from before labels were checked
        # that holds anything else is left out rather than failing the call.
        if self.run_headers and meta.run_label and is_header_safe(meta.run_label):
            headers = {
                "X-Run-Label": meta.run_label,
                "X-Agent-Run": meta.run_id,
                "X-Agent-Seq": str(meta.seq),
            }
            if meta.agent:
                headers["X-Agent-Name"] = meta.agent
        return headers


def is_header_safe(text: str) -> bool:
    return all(" " <= ch <= "~" for ch in text)


def wire_request(request: ModelRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [
            {"role": "system", "content": request.system},
            *(wire_message(m) for m in request.messages),
        ],
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
        if request.force_tool:
            body["tool_choice"] = {"type": "function", "function": {"name": request.force_tool}}
    if request.max_output_tokens is not None:
        body["max_completion_tokens"] = request.max_output_tokens
    return body


def wire_message(message: dict[str, Any]) -> dict[str, Any]:
    calls = message.get("tool_calls")
    if not calls or "function" in calls[0]:  # stored in wire form by earlier versions
        return message
    return message | {
        "tool_calls": [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls
        ]
    }


def reply_from_wire(response: Any) -> ModelReply:
    choices = response.get("choices") if isinstance(response, dict) else None
    if not choices or not isinstance(choices[0].get("message"), dict):
        raise ModelUnavailable("model answered with no choices")
    choice = choices[0]
    message = choice["message"]
    usage = response.get("usage") or {}
    return ModelReply(
        content=message.get("content"),
        tool_calls=[
            RawToolCall(
                id=c["id"],
                name=c["function"]["name"],
                arguments=c["function"].get("arguments") or "",
            )
            for c in message.get("tool_calls") or []
        ],
        finish_reason=choice.get("finish_reason"),
        model=str(response.get("model", "")),
        input_tokens=int(usage.get("prompt_tokens", 0)),
        output_tokens=int(usage.get("completion_tokens", 0)),
    )


def _classify(err: openai.APIStatusError) -> Exception:
    status = err.status_code
    detail = preview(str(err.message), 300)
    if 400 <= status < 500 and status not in RETRYABLE_STATUS:
        return ModelRefused(f"model endpoint refused the request (HTTP {status}): {detail}")
    return ModelUnavailable(
        f"model endpoint busy or failing (HTTP {status}): {detail}",
        retry_after=_retry_after(err.response.headers.get("retry-after")),
    )


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
