"""The model behind one interface: what the `call_model` activity asks and hears.

Messages, tool schemas and replies here are ours, not any vendor's: a message is
`{"role", "content", "tool_call_id"?, "tool_calls"?: [{"id", "name", "arguments"}]}`.
An implementation speaks its endpoint's wire format (activities/openai_chat.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, Field


class ToolSchema(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(BaseModel):
    model: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[ToolSchema] = Field(default_factory=list)
    force_tool: str | None = None
    # The reply's length cap, set when a budget leaves less than a reply could cost.
    max_output_tokens: int | None = None

    def fingerprinted(self) -> dict[str, Any]:
        """What makes two requests the same question (the memo's key); requests without a
        cap keep the fingerprint they had before caps existed."""
        data = self.model_dump(mode="json")
        if data["max_output_tokens"] is None:
            del data["max_output_tokens"]
        return data


class CallMeta(BaseModel):
    """What travels beside a request: who asks, and how long the answer may take."""

    run_id: str
    seq: int
    run_label: str | None = None
    # The agent asking (a test model may answer each agent of a run differently).
    agent: str | None = None
    timeout_seconds: float | None = None


class RawToolCall(BaseModel):
    id: str
    name: str
    arguments: str  # JSON text as the model wrote it; the workflow validates it


class ModelReply(BaseModel):
    content: str | None = None
    tool_calls: list[RawToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0

    def as_message(self) -> dict[str, Any]:
        """The reply as it goes back to the model on the next turn."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.model_dump() for call in self.tool_calls]
        return message


class ModelRefused(Exception):
    """The endpoint refused the request; sending it again would not change that."""


class ModelUnavailable(Exception):
    """The endpoint is busy, failing or unreachable: worth retrying (after `retry_after`)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ModelClient(Protocol):
    """One chat completion; raises ModelRefused or ModelUnavailable, never retries."""

    async def complete(self, request: ModelRequest, meta: CallMeta) -> ModelReply: ...


# Where a streaming client puts each piece of the reply's text as it arrives; it never
# blocks (the worker writes the pieces to the live log behind it).
DeltaSink = Callable[[str], None]


class StreamingModelClient(ModelClient, Protocol):
    """A client that can also stream: the same reply as `complete`, its text given to
    `deltas` piece by piece on the way. Replies a person waits on are streamed when the
    client has `stream`; the rest, and clients without it, are completed whole."""

    async def stream(
        self, request: ModelRequest, meta: CallMeta, deltas: DeltaSink
    ) -> ModelReply: ...


def streaming(client: ModelClient) -> StreamingModelClient | None:
    """The client as a streaming one, if it is."""
    return client if callable(getattr(client, "stream", None)) else None  # type: ignore[return-value]


def called_tools(message: dict[str, Any]) -> list[str]:
    """The tools a stored assistant message called, in our shape or (rows of earlier
    versions) the wire's."""
    calls = message.get("tool_calls") or []
    return [c["function"]["name"] if "function" in c else c["name"] for c in calls]
