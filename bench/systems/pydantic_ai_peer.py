"""pydantic-ai's Temporal durable execution (TemporalDurability + PydanticAIPlugin): the
model and the tool run as activities and every model activity gets the whole
conversation. Its request limit is lifted so only Temporal's limits stop it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai import UsageLimits
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin, PydanticAIWorkflow
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

# The sandbox re-imports this module for each run: what is not workflow code passes through.
with workflow.unsafe.imports_passed_through():
    from bench.systems.common import LoopPeer, Options, parse_options, report, run_figures
    from bench.systems.pydantic_ai_agent import agent

QUEUE = "bench-pydantic-ai"


@workflow.defn(name="PydanticAIPeer")
class PydanticAIPeer(PydanticAIWorkflow):
    __pydantic_ai_agents__ = (agent,)

    @workflow.run
    async def run(self, scenario: str) -> str:
        result = await agent.run(
            "Record every work item.",
            model_settings={"extra_headers": {"X-Scenario": scenario}},
            usage_limits=UsageLimits(request_limit=None),
        )
        return str(result.output)


class PydanticAI(LoopPeer):
    queue = QUEUE
    workflow_run = PydanticAIPeer.run

    async def connect(self, options: Options) -> Client:
        return await Client.connect(options.address, plugins=[PydanticAIPlugin()])

    @asynccontextmanager
    async def worker(self, client: Client, options: Options) -> AsyncIterator[Any]:
        async with Worker(client, task_queue=QUEUE, workflows=[PydanticAIPeer]) as worker:
            yield worker


if __name__ == "__main__":
    report(run_figures("pydantic-ai", PydanticAI(), parse_options(__doc__ or "")))
