"""What Temporal's Workflow Streams (temporalio.contrib.workflow_streams) would add to a
run's history per step, beside the query our event protocol uses (docs/events.md).

    python -m bench.stream_cost [--steps 50]

A minimal workflow runs N steps (one activity each, 50 ms, like a tool call) and, when
asked, publishes one small event per step to a stream; 0, 1 or 3 subscribers follow it
live, as open console pages would. It prints the history bytes per step of each case.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.api.history.v1 import History
from temporalio.client import Client
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamClient
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from bench.harness import bench_services

EVENT = {"v": 1, "kind": "tool", "detail": "pay_invoice (seq 13)", "status": "running"}


@activity.defn
async def one_step(index: int) -> int:
    await asyncio.sleep(0.05)
    return index


@workflow.defn
class StreamedSteps:
    @workflow.init
    def __init__(self, steps: int, publish: bool) -> None:
        self.stream = WorkflowStream()

    @workflow.run
    async def run(self, steps: int, publish: bool) -> int:
        for index in range(steps):
            await workflow.execute_activity(
                one_step, index, start_to_close_timeout=timedelta(seconds=30)
            )
            if publish:
                self.stream.topic("moments").publish({**EVENT, "offset": index + 1})
        return steps


async def follow(client: Client, workflow_id: str, steps: int) -> None:
    stream = WorkflowStreamClient.create(client, workflow_id)
    async for item in stream.subscribe("moments"):
        if item.data["offset"] >= steps:
            return


async def bytes_per_step(client: Client, steps: int, publish: bool, watchers: int) -> float:
    workflow_id = f"stream-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(
        StreamedSteps.run, args=[steps, publish], id=workflow_id, task_queue="stream-cost"
    )
    await asyncio.gather(
        handle.result(), *(follow(client, workflow_id, steps) for _ in range(watchers))
    )
    history = await handle.fetch_history()
    return History(events=history.events).ByteSize() / steps


async def main(steps: int) -> None:
    async with bench_services() as services:
        client = services.env.client
        async with Worker(
            client,
            task_queue="stream-cost",
            workflows=[StreamedSteps],
            activities=[one_step],
            # The module holds a benchmark's imports (argparse …); the workflow is trivial.
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            cases = [
                ("no stream events (what a query-based protocol costs)", False, 0),
                ("one event per step, nobody watching", True, 0),
                ("one event per step, 1 page watching", True, 1),
                ("one event per step, 3 pages watching", True, 3),
            ]
            base = None
            for title, publish, watchers in cases:
                per_step = await bytes_per_step(client, steps, publish, watchers)
                base = per_step if base is None else base
                print(f"{title:<55} {per_step:8,.0f} B/step  (+{per_step - base:,.0f})", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=50)
    asyncio.run(main(parser.parse_args().steps))
