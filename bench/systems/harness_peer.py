"""Temporal's agent harness (`temporal-agent-harness`, with its OpenAI Agents SDK plugin):
an agent is a long-lived workflow that takes messages; one `work` message opens a turn in
which the SDK's loop runs, the model call and the tool (an activity tool) as activities.
Large-payload offloading is off, so its history is counted whole as the others' are; the
SDK's trace export is off (no network here)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

# The sandbox re-imports this module for each run: what is not workflow code passes through.
with workflow.unsafe.imports_passed_through():
    from agents import Agent, ModelSettings, Runner
    from agents.models.openai_provider import OpenAIProvider
    from openai import AsyncOpenAI
    from temporal_agent_harness.ai_sdks.openai_agents import (
        ModelActivityParameters,
        OpenAIAgentsPlugin,
    )
    from temporal_agent_harness.ai_sdks.openai_agents_harness import (
        as_openai_agent_tool,
        harness_observer_factory,
        stream_to_provider,
    )
    from temporal_agent_harness.harness import AgentWorkflowRunner, agent
    from temporal_agent_harness.harness.agent_client import AgentClient
    from temporal_agent_harness.harness.agent_protocol.agent_interface import (
        AgentConfig,
        TextReply,
        ToolApprovalPolicy,
    )
    from temporal_agent_harness.plugin import AgentHarnessPlugin
    from temporalio.contrib.workflow_streams import WorkflowStream
    from temporalio.workflow import ActivityConfig

    from bench.systems.common import Options, parse_options, report, run_figures

QUEUE = "bench-agent-harness"
TIMEOUT = timedelta(seconds=60)


@agent.activity_tool_defn(activity_config=ActivityConfig(start_to_close_timeout=TIMEOUT))
async def record_progress(step: int, note: str) -> str:
    """Record that a work item is done."""
    return f"recorded step {step}: {note}"


class Work(BaseModel):
    """The work to do: the offline model's scenario."""

    scenario: str


@agent.defn(name="HarnessPeer")
class HarnessPeer:
    @agent.init
    def __init__(self, config: AgentConfig) -> None:
        self._runner = AgentWorkflowRunner(
            config,
            stream=WorkflowStream(),
            approval_policy_default=ToolApprovalPolicy.dangerously_skip_all(),
        )
        self._failed: str | None = "no turn ran"

    @agent.accepts
    async def work(self, msg: Work) -> TextReply:
        """Record every work item."""
        sdk_agent = Agent(
            name="bench_peer",
            instructions="Work through the items one by one, recording each.",
            model="offline",
            model_settings=ModelSettings(extra_headers={"X-Scenario": msg.scenario}),
            tools=[as_openai_agent_tool(self._runner, record_progress)],
        )
        try:
            result = Runner.run_streamed(
                sdk_agent, "Record every work item.", context=self._runner, max_turns=1_000_000
            )
            async for _ in result.stream_events():
                pass
        except Exception as err:
            self._failed = f"{type(err).__name__}: {err}"
            raise
        self._failed = None
        return TextReply(text=str(result.final_output))

    @agent.teardown
    async def teardown(self) -> None:
        # The harness turns a handler's error into an event, not a failed run: a bench run
        # that did not finish its turn must fail.
        if self._failed:
            raise ApplicationError(self._failed, non_retryable=True)


class Harness:
    rebuilds = False

    async def connect(self, options: Options) -> Client:
        model = AsyncOpenAI(base_url=options.model_url, api_key="offline")
        sdk = OpenAIAgentsPlugin(
            model_params=ModelActivityParameters(
                start_to_close_timeout=TIMEOUT, stream_to_provider=stream_to_provider
            ),
            observer_factory=harness_observer_factory,
            model_provider=OpenAIProvider(openai_client=model, use_responses=False),
        )
        harness = AgentHarnessPlugin(tools=[record_progress], large_payload_offload=None)
        return await Client.connect(options.address, plugins=[sdk, harness])  # harness last

    @asynccontextmanager
    async def worker(self, client: Client, options: Options) -> AsyncIterator[Any]:
        async with Worker(client, task_queue=QUEUE, workflows=[HarnessPeer]) as worker:
            yield worker

    async def run(self, client: Client, options: Options, steps: int, workflow_id: str) -> None:
        await AgentClient(client, workflow_id).start_and_submit_message(
            "work",
            {"scenario": options.scenario(steps)},
            workflow_name="HarnessPeer",
            task_queue=QUEUE,
            start_config=AgentConfig(),
        )
        handle = client.get_workflow_handle(workflow_id)
        await handle.signal("close")
        await handle.result()

    async def rebuild(self, client: Client, workflow_id: str) -> int:
        raise NotImplementedError("no per-step state to rebuild")


if __name__ == "__main__":
    report(run_figures("agent-harness", Harness(), parse_options(__doc__ or "")))
