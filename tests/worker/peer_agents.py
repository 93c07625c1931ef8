"""Three frameworks' agents for one worker: pydantic-ai's (TemporalDurability), the OpenAI
Agents SDK's (temporalio's openai_agents integration) and ours, each a plain tool loop
with the one tool the offline model's `loop` scenario calls (`record_progress`).

The peers' agents are built as the benchmark builds them (bench/systems/*peer*.py); their
model is the offline model over HTTP, its address set by the test
(`pydantic_peer_agent.point_at`).
"""

from __future__ import annotations

import os
from datetime import timedelta

from temporalio import workflow

# The OpenAI Agents SDK would export its traces to OpenAI, from the worker too.
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

# The sandbox re-imports this module for each run: what is not workflow code passes through.
with workflow.unsafe.imports_passed_through():
    from agents import Agent as OpenAIAgent
    from agents import ModelSettings, Runner
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow
    from temporalio.openai_agents.workflow import activity_as_tool

    from durable_agents import Agent, tool
    from tests.worker.pydantic_peer_agent import pydantic_agent
    from tests.worker.tool_loop import SCENARIO, record_progress

ANSWER = "Done: 2 work items recorded."
TIMEOUT = timedelta(seconds=30)


@workflow.defn(name="PydanticAIPeerAgent")
class PydanticAIPeerAgent(PydanticAIWorkflow):  # type: ignore[misc]
    __pydantic_ai_agents__ = (pydantic_agent,)

    @workflow.run
    async def run(self, task: str) -> str:
        result = await pydantic_agent.run(
            task, model_settings={"extra_headers": {"X-Scenario": SCENARIO}}
        )
        return str(result.output)


@workflow.defn(name="OpenAIAgentsPeerAgent")
class OpenAIAgentsPeerAgent:
    @workflow.run
    async def run(self, task: str) -> str:
        agent = OpenAIAgent(
            name="openai_peer",
            instructions="Work through the items one by one, recording each.",
            model="offline",
            model_settings=ModelSettings(extra_headers={"X-Scenario": SCENARIO}),
            tools=[activity_as_tool(record_progress, start_to_close_timeout=TIMEOUT)],
        )
        result = await Runner.run(agent, task)
        return str(result.final_output)


# Ours: a plain tool loop with the same tool.
ours = Agent(
    name="recorder",
    instructions="Work through the items one by one, recording each.",
    planning=False,
    tools=[tool(record_progress)],
)
