"""Raw Temporal: a minimal workflow with one model and one tool activity per step, the
model's a real HTTP call to the offline model through the openai client: the floor any
agent on Temporal stands on, for the same activity count."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import openai
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from bench.raw_workflow import RawRun, RawStep, RawWaitingWorkflow, RawWorkflow
from bench.systems.common import LOOP_TOOL_SCHEMA, Options, parse_options, report, run_figures
from durable_agents.examples.providers import providers_at

QUEUE = "bench-raw"

# What the model is told and shown of the tool, as an agent would send it.
INSTRUCTIONS = "Work through the items one by one, recording each with record_progress."


class RawActivities:
    def __init__(self, model_url: str, data_dir: Path) -> None:
        self.client = openai.AsyncOpenAI(base_url=model_url, api_key="bench", max_retries=0)
        self.data_dir = data_dir

    @activity.defn(name="raw_tool")
    async def raw_tool(self, step: int) -> dict[str, Any]:
        """The bench tool's own work, as ours does it (examples/before_agents.py): a note
        written at the records provider, once per key."""
        run = activity.info().workflow_id or "raw"
        records = providers_at(self.data_dir).records
        params = {"step": step, "note": f"n{step}"}
        return await asyncio.to_thread(records.call, f"{run}/step-{step}", "note", params, run)

    @activity.defn(name="raw_model")
    async def raw_model(self, call: RawStep) -> str:
        """One chat completion: the goal, and the tool results so far (the `loop` scenario
        reads its turn from them); the reply's tool call is what the workflow needs."""
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": "Record every work item."},
        ]
        messages += [
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"recorded step {i}"}
            for i in range(1, call.step)
        ]
        reply: dict[str, Any] = await self.client.post(
            "/chat/completions",
            cast_to=dict[str, Any],
            body={"model": "offline", "messages": messages, "tools": [LOOP_TOOL_SCHEMA]},
            options={"headers": {"X-Scenario": call.scenario}},
        )
        message = reply["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        return str(calls[0]["function"]["arguments"]) if calls else str(message.get("content"))


class Raw:
    async def connect(self, options: Options) -> Client:
        return await Client.connect(options.address)

    @asynccontextmanager
    async def worker(self, client: Client, options: Options) -> AsyncIterator[Any]:
        with tempfile.TemporaryDirectory() as data_dir:
            found = RawActivities(options.model_url, Path(data_dir))
            async with Worker(
                client,
                task_queue=QUEUE,
                workflows=[RawWorkflow, RawWaitingWorkflow],
                activities=[found.raw_model, found.raw_tool],
            ) as worker:
                yield worker

    async def run(self, client: Client, options: Options, steps: int, workflow_id: str) -> None:
        run = RawRun(steps=steps, scenario=options.scenario(steps))
        await client.execute_workflow(RawWorkflow.run, run, id=workflow_id, task_queue=QUEUE)

    async def start_waiting(self, client: Client, options: Options, workflow_id: str) -> None:
        handle = await client.start_workflow(
            RawWaitingWorkflow.run, id=workflow_id, task_queue=QUEUE
        )
        await handle.query(RawWaitingWorkflow.waiting)  # answered once its first task ran

    rebuilds = False

    async def rebuild(self, client: Client, workflow_id: str) -> int:
        raise NotImplementedError("no per-step state to rebuild")


if __name__ == "__main__":
    report(run_figures("raw", Raw(), parse_options(__doc__ or "")))
