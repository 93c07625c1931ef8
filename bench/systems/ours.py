"""durable-agents: the agent workflow on the `long` scenario, step-scoped context, with
the worker, stores and client of the real thing."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from temporalio.client import Client

from bench.harness import bench_settings
from bench.systems.common import Options, parse_options, report, run_figures
from starters import runs
from starters.timeline import rebuild
from worker.client import connect
from worker.main import build_worker
from worker.settings import Settings
from workflows.contracts import RunRequest
from workflows.state import RunStatus


class Ours:
    def __init__(self) -> None:
        self.settings: Settings | None = None

    def _settings(self, options: Options, data_dir: Path) -> Settings:
        model_port = urlsplit(options.model_url).port or 80
        return bench_settings(options.address, model_port, data_dir, task_queue="bench-ours")

    async def connect(self, options: Options) -> Client:
        return await connect(self._settings(options, Path(tempfile.gettempdir())))

    @asynccontextmanager
    async def worker(self, client: Client, options: Options) -> AsyncIterator[Any]:
        with tempfile.TemporaryDirectory() as data_dir:
            self.settings = self._settings(options, Path(data_dir))
            async with build_worker(client, self.settings) as worker:
                yield worker

    async def run(self, client: Client, options: Options, steps: int, workflow_id: str) -> None:
        assert self.settings is not None, "run needs the worker started"
        request = RunRequest.model_validate(
            {
                "goal": f"bench {steps} steps",
                "scenario": f"long?steps={steps}&reply_bytes={options.reply_bytes}",
                "limits": {"context": "step"},
            }
        )
        run = await runs.start_run(client, self.settings, request, run_id=workflow_id)
        outcome = await runs.wait_for_outcome(client, run.run_id)
        if outcome["status"] != "completed":
            raise RuntimeError(f"run {run.run_id} ended {outcome}")

    async def start_waiting(self, client: Client, options: Options, workflow_id: str) -> None:
        """A pay-invoice run, waiting for a person to approve the payment."""
        assert self.settings is not None, "runs need the worker started"
        request = RunRequest(goal="Pay INV-1001", scenario="pay-invoice")
        run = await runs.start_run(client, self.settings, request, run_id=workflow_id)
        for _ in range(400):
            if (await runs.get_summary(client, run.run_id)).status == RunStatus.AWAITING_APPROVAL:
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"run {run.run_id} did not come to wait for approval within 20 s")

    rebuilds = True

    async def rebuild(self, client: Client, workflow_id: str) -> int:
        return len((await rebuild(client, workflow_id)).moments)


if __name__ == "__main__":
    report(run_figures("ours", Ours(), parse_options(__doc__ or "")))
