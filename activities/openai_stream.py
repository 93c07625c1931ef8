"""A streamed chat completion, put together: the text deltas go to the sink as they come,
the tool calls' pieces are joined by index, and the last chunk's usage is the call's."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from durable_agents.activities.model_client import ModelReply, ModelUnavailable, RawToolCall


async def collect(chunks: AsyncIterator[Any], sink: Callable[[str], None]) -> ModelReply:
    """The reply a stream of `ChatCompletionChunk`s makes; ModelUnavailable when it ends
    before a finish reason (the endpoint dropped it: worth another attempt)."""
    content: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish_reason: str | None = None
    model = ""
    usage: Any = None
    async for chunk in chunks:
        model = chunk.model or model
        usage = chunk.usage or usage
        for choice in chunk.choices[:1]:
            delta = choice.delta
            if delta.content:
                content.append(delta.content)
                sink(delta.content)
            for piece in delta.tool_calls or []:
                call = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = piece.id or call["id"]
                if piece.function is not None:
                    call["name"] += piece.function.name or ""
                    call["arguments"] += piece.function.arguments or ""
            finish_reason = choice.finish_reason or finish_reason
    if finish_reason is None:
        raise ModelUnavailable("the model's stream ended before its reply did")
    return ModelReply(
        content="".join(content) if content else None,
        tool_calls=[RawToolCall(**calls[i]) for i in sorted(calls)],
        finish_reason=finish_reason,
        model=model,
        input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
    )
