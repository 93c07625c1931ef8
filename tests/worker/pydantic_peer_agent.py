"""pydantic-ai's agent for the side-by-side tests, built once outside the workflow sandbox
(its module passes through, as bench/systems/pydantic_ai_agent.py does): its model call
and its tool run as activities on the host, with this model client, which the test
points at the offline model (`point_at`)."""

from __future__ import annotations

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.worker.tool_loop import record_progress

model_client = AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="offline")
pydantic_agent = Agent(
    OpenAIChatModel("offline", provider=OpenAIProvider(openai_client=model_client)),
    name="pydantic_peer",
    instructions="Work through the items one by one, recording each.",
    tools=[record_progress],
    capabilities=[TemporalDurability()],
)


def point_at(base_url: str) -> None:
    """The agent's model at the offline model (its port is the session's)."""
    model_client.base_url = base_url
