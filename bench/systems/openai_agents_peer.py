"""The OpenAI Agents SDK on Temporal (temporalio's openai_agents integration): the agent
loop runs in the workflow, the model call and the tool (activity_as_tool) are
activities, and every model activity gets the whole conversation. max_turns is lifted so
only Temporal's limits stop it; the SDK's trace export is off (no network here)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

# The SDK would export its traces to OpenAI, from the worker too; there is no network here.
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

# The sandbox re-imports this module for each run: what is not workflow code passes through.
with workflow.unsafe.imports_passed_through():
    from agents import Agent, ModelSettings, Runner
    from agents.models.openai_provider import OpenAIProvider
    from openai import AsyncOpenAI
    from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
    from temporalio.openai_agents.workflow import activity_as_tool

    from bench.systems.common import LoopPeer, Options, parse_options, report, run_figures

QUEUE = "bench-openai-agents"
TIMEOUT = timedelta(seconds=60)


@activity.defn
async def record_progress(step: int, note: str) -> str:
    """Record that a work item is done."""
    return f"recorded step {step}: {note}"


@workflow.defn(name="OpenAIAgentsPeer")
class OpenAIAgentsPeer:
    @workflow.run
    async def run(self, scenario: str) -> str:
        agent = Agent(
            name="bench_peer",
            instructions="Work through the items one by one, recording each.",
            model="offline",
            model_settings=ModelSettings(extra_headers={"X-Scenario": scenario}),
            tools=[activity_as_tool(record_progress, start_to_close_timeout=TIMEOUT)],
        )
        result = await Runner.run(agent, "Record every work item.", max_turns=1_000_000)
        return str(result.final_output)


class OpenAIAgents(LoopPeer):
    queue = QUEUE
    workflow_run = OpenAIAgentsPeer.run

    def _plugin(self, options: Options) -> OpenAIAgentsPlugin:
        client = AsyncOpenAI(base_url=options.model_url, api_key="offline")
        return OpenAIAgentsPlugin(
            model_params=ModelActivityParameters(start_to_close_timeout=TIMEOUT),
            model_provider=OpenAIProvider(openai_client=client, use_responses=False),
        )

    async def connect(self, options: Options) -> Client:
        return await Client.connect(options.address, plugins=[self._plugin(options)])

    @asynccontextmanager
    async def worker(self, client: Client, options: Options) -> AsyncIterator[Any]:
        async with Worker(
            client,
            task_queue=QUEUE,
            workflows=[OpenAIAgentsPeer],
            activities=[record_progress],
        ) as worker:
            yield worker


if __name__ == "__main__":
    report(run_figures("openai-agents", OpenAIAgents(), parse_options(__doc__ or "")))
