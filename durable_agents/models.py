"""Bring your own model client: what the worker asks of a model, and what it hears back.

The worker calls `complete` for a reply, or `stream` for a reply a person waits on (a
conversation's turn) when the client has it, handing it `deltas`: a function to give each
piece of text as it arrives (it never blocks; the worker writes the pieces to the live
log, outside the history). Either way the reply is memoized by the run, its usage counted
against the budget, and its failures classified by the exception raised:

- `ModelRefused`: the endpoint refused the request; sending it again would not change
  that (the run fails the call at once);
- `ModelUnavailable`: busy, failing or unreachable; Temporal retries the call, after
  `retry_after` seconds when given.

A client never retries by itself. Give an agent yours with
`Model("your-model", client=lambda: YourClient(...))` (docs/your-own-agent.md, "Your own
model client"); the OpenAI-compatible `OpenAIChatClient` is the default.
"""

from durable_agents.activities.model_client import (
    CallMeta,
    DeltaSink,
    ModelClient,
    ModelRefused,
    ModelReply,
    ModelRequest,
    ModelUnavailable,
    RawToolCall,
    StreamingModelClient,
    ToolSchema,
)
from durable_agents.activities.openai_chat import OpenAIChatClient

__all__ = [
    "CallMeta",
    "DeltaSink",
    "ModelClient",
    "ModelRefused",
    "ModelReply",
    "ModelRequest",
    "ModelUnavailable",
    "OpenAIChatClient",
    "RawToolCall",
    "StreamingModelClient",
    "ToolSchema",
]
