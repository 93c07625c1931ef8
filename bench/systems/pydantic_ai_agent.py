"""The pydantic-ai agent of the benchmark, built once outside the workflow sandbox.

The model is pydantic-ai's own OpenAI chat model over HTTP to the offline model (its URL
from BENCH_MODEL_URL); the one tool is a plain function tool, which TemporalDurability
runs as an activity.
"""

from __future__ import annotations

import os

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

MODEL_URL = os.environ.get("BENCH_MODEL_URL", "http://127.0.0.1:9/v1")


def record_progress(step: int, note: str) -> str:
    """Record that a work item is done."""
    return f"recorded step {step}: {note}"


agent = Agent(
    OpenAIChatModel("offline", provider=OpenAIProvider(base_url=MODEL_URL, api_key="offline")),
    name="bench_peer",
    instructions="Work through the items one by one, recording each.",
    tools=[record_progress],
    capabilities=[TemporalDurability()],
)
