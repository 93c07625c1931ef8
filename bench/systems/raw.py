"""Raw Temporal: a minimal workflow with one trivial model and one trivial tool activity
per step, the engine's ceiling for the same activity count."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from bench.raw_workflow import RawWaitingWorkflow, RawWorkflow, raw_model, raw_tool
from bench.systems.common import Options, parse_options, report, run_figures

QUEUE = "bench-raw"


class Raw:
    async def connect(self, options: Options) -> Client:
        return await Client.connect(options.address)

    @asynccontextmanager
    async def worker(self, client: Client, options: Options) -> AsyncIterator[Any]:
        async with Worker(
            client,
            task_queue=QUEUE,
            workflows=[RawWorkflow, RawWaitingWorkflow],
            activities=[raw_model, raw_tool],
        ) as worker:
            yield worker

    async def run(self, client: Client, options: Options, steps: int, workflow_id: str) -> None:
        await client.execute_workflow(RawWorkflow.run, steps, id=workflow_id, task_queue=QUEUE)

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
