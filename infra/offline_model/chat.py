"""The `chat` scenario: a support conversation, answered from the conversation itself.

Each turn reads the last message: "remember that ..." calls the memory's remember tool,
"what do you know ..." its recall, a person's message that names an order and asks for a
refund calls the refund tool, one that names an order looks it up, anything else is
echoed; after tool results, the reply says what they were. Stateless like the rest of the
offline model. Its parameters shape the stream of the reply: `chunk_ms` between pieces,
`hold=NAME` stops every reply after its first piece until a test releases NAME
(POST /v1/scripted/holds/NAME), `reply_bytes` pads the reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from durable_agents.infra.offline_model.scenarios import (
    Reply,
    ScenarioError,
    ScenarioSpec,
    ScriptedCall,
    filler,
)

ORDER = re.compile(r"\b(A-\d{4})\b")
REMEMBER = re.compile(r"\bremember that (.+)", re.IGNORECASE)
RECALL = re.compile(r"\bwhat do you (?:know|remember)\b(.*)", re.IGNORECASE)
REFUND = re.compile(r"\brefund\b.*?\b(A-\d{4})\b\D*(\d+(?:\.\d{1,2})?)", re.IGNORECASE)


@dataclass(frozen=True)
class StreamShape:
    chunk_ms: float = 0.0
    hold: str | None = None


def chat_reply(spec: ScenarioSpec, messages: list[dict[str, Any]], tools: list[str]) -> Reply:
    reply_bytes = _int(spec.params.get("reply_bytes", "0"), "reply_bytes")
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        results = []
        for message in reversed(messages):
            if message.get("role") != "tool":
                break
            results.append(str(message.get("content") or "")[:200])
        return Reply(content="Done: " + " | ".join(reversed(results)))
    text = str(last.get("content") or "")
    if (match := REMEMBER.search(text)) and "remember" in tools:
        fact = match[1].strip().rstrip(".")
        return Reply(tool_calls=[ScriptedCall(name="remember", arguments={"text": fact})])
    if (match := RECALL.search(text)) and "recall" in tools:
        query = match[1].strip(" ?.")
        return Reply(tool_calls=[ScriptedCall(name="recall", arguments={"query": query})])
    refund_tool = next((t for t in tools if "refund" in t), None)
    look_tool = next((t for t in tools if "look" in t), None)
    if (match := REFUND.search(text)) and refund_tool:
        arguments = {"order_id": match[1], "amount": match[2]}
        return Reply(tool_calls=[ScriptedCall(name=refund_tool, arguments=arguments)])
    if (match := ORDER.search(text)) and look_tool:
        return Reply(tool_calls=[ScriptedCall(name=look_tool, arguments={"order_id": match[1]})])
    content = f"You said: {text}"
    if reply_bytes > len(content):
        content += " " + filler(reply_bytes - len(content) - 1, len(messages))
    return Reply(content=content)


def stream_shape(spec: ScenarioSpec) -> StreamShape:
    unknown = set(spec.params) - {"chunk_ms", "hold", "reply_bytes"}
    if unknown or spec.faults:
        raise ScenarioError("chat takes chunk_ms, hold and reply_bytes only (no faults)")
    chunk_ms = float(_int(spec.params.get("chunk_ms", "0"), "chunk_ms"))
    hold = spec.params.get("hold") or None
    if hold is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", hold):
        raise ScenarioError("chat: hold is a name of letters, digits, - and _")
    return StreamShape(chunk_ms=chunk_ms, hold=hold)


def _int(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ScenarioError(f"chat: {name} must be a whole number") from None
    if not 0 <= value <= 1_000_000:
        raise ScenarioError(f"chat: {name} must be 0..1000000")
    return value
