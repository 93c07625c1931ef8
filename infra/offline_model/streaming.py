"""A completion sent as the endpoint's stream (server-sent events of chat.completion.chunk
objects, as OpenAI-compatible endpoints send with `"stream": true`): the text in pieces,
each tool call whole in one chunk, the finish reason, then usage when asked for."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

# A piece of the text: a word with the space before it, as models stream tokens.
PIECE = re.compile(r"\s*\S+")


async def chunks(
    completion: dict[str, Any],
    *,
    usage: bool,
    delay: float = 0.0,
    after_first: Callable[[], Awaitable[object]] | None = None,
) -> AsyncIterator[str]:
    choice = completion["choices"][0]
    message = choice["message"]
    base = {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
    }

    def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(body | extra)}\n\n"

    yield event({"role": "assistant", "content": ""})
    pieces = PIECE.findall(message.get("content") or "")
    for i, piece in enumerate(pieces):
        yield event({"content": piece})
        if i == 0 and after_first is not None:
            await after_first()
        if delay:
            await asyncio.sleep(delay)
    for index, call in enumerate(message.get("tool_calls") or []):
        yield event({"tool_calls": [call | {"index": index}]})
    yield event({}, choice["finish_reason"])
    if usage:
        yield f"data: {json.dumps(base | {'choices': [], 'usage': completion['usage']})}\n\n"
    yield "data: [DONE]\n\n"
