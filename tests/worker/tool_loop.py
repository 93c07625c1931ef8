"""The one tool of the offline model's `loop` scenario, for every framework's agent."""

from __future__ import annotations

from temporalio import activity

SCENARIO = "loop?steps=2&reply_bytes=16"  # two tool calls, then the answer


@activity.defn  # the OpenAI Agents SDK's tools are activities; the others call it as is
async def record_progress(step: int, note: str) -> str:
    """Record that a work item is done."""
    return f"recorded step {step}: {note}"
