"""durable-agents: the agent workflow on the `long` scenario, step-scoped context, with
the worker, stores and client of the real thing."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from asyncio.subprocess import PIPE
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from temporalio.client import Client

from bench.harness import bench_settings
from bench.systems.common import Measuring, Options, log, parse_options, report, run_figures
from durable_agents.control import runs
from durable_agents.control.timeline import chain_runs, rebuild
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import Settings
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.records import RunStatus

ROOT = Path(__file__).resolve().parents[2]
OUR_PACKAGES = [
    str(ROOT / name)
    for name in (
        *("workflows", "runtime", "activities", "worker", "infra", "control", "console"),
        *("starters", "durable_agents", "examples", "bench"),
    )
]


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

    async def travel(self, client: Client, measuring: Measuring) -> dict[str, Any]:
        """Time travel as a person uses it: every state of a 500-step run (--rebuild-steps)
        rebuilt in a process of its own, as `agentctl` and the console do (the rebuild
        phase times it inside the worker's process); `agentctl history RUN --step K` (the
        command) on a 2,000-step continue-as-new chain (--travel-steps) for K spread over
        the chain. Each in a process of its own, our modules compiled first (untimed), as pip
        compiles them on a person's machine when it installs them."""
        short = await measuring.finished_run(measuring.options.rebuild_steps)
        steps = measuring.options.rebuild_steps
        await self._own_process(sys.executable, "-m", "compileall", "-q", *OUR_PACKAGES)
        _, out = await self._own_process(sys.executable, "-m", "bench.rebuild_states", short)
        alone = json.loads(out)
        log(
            "ours",
            f"rebuilt {alone['states']} states of a {steps}-step run in "
            f"{alone['seconds']:.2f} s in a process of its own",
        )
        chain = await measuring.finished_run(measuring.options.travel_steps)
        last = (await runs.get_state(client, chain)).moment
        agentctl = str(Path(sys.executable).with_name("agentctl"))  # the installed command
        step_seconds = {}
        for index in sorted({1, last // 4, last // 2, 3 * last // 4, last}):
            seconds, out = await self._own_process(
                agentctl, "history", chain, "--step", str(index), "--json"
            )
            if json.loads(out)["moment"] != index:
                raise RuntimeError(f"history --step {index} printed another step")
            step_seconds[index] = seconds
            log("ours", f"history --step {index} of {last}: {seconds:.2f} s")
        return {
            "rebuild_steps": steps,
            "rebuild_seconds": alone["seconds"],
            "rebuilt_states": alone["states"],
            "chain_steps": measuring.options.travel_steps,
            "chain_runs": len(await chain_runs(client, chain)),
            "chain_moments": last,
            "step_seconds": step_seconds,
        }

    async def _own_process(self, *command: str) -> tuple[float, str]:
        """Seconds a command against this stack takes, start to exit, and what it printed."""
        assert self.settings is not None, "time travel needs the worker started"
        env = {
            **os.environ,
            "AGENT_TEMPORAL_HOST": self.settings.temporal_host,
            "AGENT_TEMPORAL_PORT": str(self.settings.temporal_port),
            "AGENT_DATA_DIR": str(self.settings.data_dir),
        }
        # As on a person's machine, where Python caches the compiled modules (pip compiles
        # them on install): a shell that turns the cache off (PYTHONDONTWRITEBYTECODE, set
        # on some CI machines) would add the compiling of every module to each command.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        started = time.perf_counter()
        done = await asyncio.create_subprocess_exec(*command, env=env, stdout=PIPE, stderr=PIPE)
        out, err = await done.communicate()
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command[1:])} failed: {err.decode().strip()}")
        return seconds, out.decode()

    async def rebuild(self, client: Client, workflow_id: str) -> int:
        return len((await rebuild(client, workflow_id)).moments)


if __name__ == "__main__":
    report(run_figures("ours", Ours(), parse_options(__doc__ or "")))
