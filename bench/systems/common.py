"""What every system in the side-by-side benchmark measures, and how it reports it.

Each system runs in its own process (so its peak RSS is its own), against the one dev
server and offline model the orchestrator started, and prints its figures as one JSON
line. A system on Temporal only says how to start a worker and how to run N steps; the
rest is the same for all of them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError

from bench.harness import history_bytes
from starters.timeline import fetch_chain

SIZE_STEPS = (10, 50, 100, 200)
RESULT_MARK = "BENCH-RESULT "


@dataclass
class Options:
    address: str
    model_url: str
    steps: int = 100
    concurrent: int = 20
    reply_bytes: int = 1024
    size_steps: tuple[int, ...] = SIZE_STEPS
    fail_steps: int = 400
    rebuild_steps: int = 500

    def scenario(self, steps: int) -> str:
        return f"loop?steps={steps}&reply_bytes={self.reply_bytes}"


class TemporalSystem(Protocol):
    """A framework on Temporal: its client, its worker, one run of N model+tool steps."""

    async def connect(self, options: Options) -> Client: ...

    def worker(self, client: Client, options: Options) -> AbstractAsyncContextManager[Any]: ...

    async def run(self, client: Client, options: Options, steps: int, workflow_id: str) -> None:
        """Run N steps to the end; raise if the run did not complete."""

    rebuilds: bool
    """Whether the system can rebuild each step's state of a finished run."""

    async def rebuild(self, client: Client, workflow_id: str) -> int:
        """Rebuild every step's state of a finished run; how many states it rebuilt."""


class LoopPeer:
    """A peer whose workflow takes the `loop` scenario and runs its agent to the end; it
    keeps no per-step state of its own to rebuild."""

    queue: str
    workflow_run: Any  # the peer workflow's @workflow.run method
    rebuilds = False

    async def run(self, client: Client, options: Options, steps: int, workflow_id: str) -> None:
        await client.execute_workflow(
            self.workflow_run, options.scenario(steps), id=workflow_id, task_queue=self.queue
        )

    async def rebuild(self, client: Client, workflow_id: str) -> int:
        raise NotImplementedError("no per-step state to rebuild")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def steps_per_second(run: Callable[[int], Awaitable[None]], runs: int, steps: int) -> float:
    started = time.perf_counter()
    await asyncio.gather(*(run(steps) for _ in range(runs)))
    return runs * steps / (time.perf_counter() - started)


async def completed_steps(client: Client, workflow_id: str) -> int:
    """Steps a run got through: completed activities over the chain, two per step."""
    completed = EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    done = 0
    for _, history in await fetch_chain(client, workflow_id):
        done += sum(1 for e in history.events if e.event_type == completed)
    return done // 2


def failure_text(err: BaseException) -> str:
    cause = err.cause if isinstance(err, WorkflowFailureError) else err
    text = f"{type(cause).__name__}: {cause}"
    reason = getattr(cause, "reason", None) or getattr(cause, "message", None)
    return f"{text} ({reason})" if reason and str(reason) not in text else text


async def temporal_figures(name: str, system: TemporalSystem, options: Options) -> dict[str, Any]:
    client = await system.connect(options)
    measuring = Measuring(name, system, client, options)
    figures: dict[str, Any] = {"system": name}
    async with system.worker(client, options):
        figures["steps_per_s_1"] = await measuring.throughput(1)
        figures["steps_per_s_many"] = await measuring.throughput(options.concurrent)
        figures["bytes_per_step"], figures["chain_runs"] = await measuring.sizes()
        figures["fails_at"] = await measuring.failure()
        figures["rebuild"] = await measuring.rebuild()
    figures["peak_rss_mb"] = peak_rss_mb()
    return figures


@dataclass
class SizedRun:
    workflow_id: str
    error: WorkflowFailureError | None = None


@dataclass
class Measuring:
    """One system's runs, in order: throughput, then sizes, whose runs the failure and
    rebuild figures reuse where they can."""

    name: str
    system: TemporalSystem
    client: Client
    options: Options
    finished: dict[int, SizedRun] = field(default_factory=dict)

    async def _run(self, steps: int, run: SizedRun | None = None) -> SizedRun:
        """Run N steps; a run that fails keeps its error."""
        run = run or SizedRun(new_id(self.name))
        try:
            await self.system.run(self.client, self.options, steps, run.workflow_id)
        except WorkflowFailureError as err:
            run.error = err
        return run

    async def throughput(self, runs: int) -> float:
        async def one(steps: int) -> None:
            await self.system.run(self.client, self.options, steps, new_id(self.name))

        per_second = await steps_per_second(one, runs, self.options.steps)
        log(self.name, f"{runs} run(s): {per_second:.1f} steps/s")
        return per_second

    async def sizes(self) -> tuple[dict[int, float], dict[int, int]]:
        """History bytes per step by run length (and the runs in its continue-as-new
        chain), stopping at the first run that fails."""
        sizes: dict[int, float] = {}
        chains: dict[int, int] = {}
        for steps in sorted(self.options.size_steps):
            run = self.finished[steps] = await self._run(steps)
            if run.error is not None:
                break
            size, _, chain = await history_bytes(self.client, run.workflow_id)
            sizes[steps], chains[steps] = size / steps, chain
            log(
                self.name, f"{steps} steps: {size / steps:,.0f} B/step ({size:,} B, {chain} run(s))"
            )
        return sizes, chains

    async def failure(self) -> dict[str, Any]:
        """The step count at which a run fails: from a size run that failed, or else from
        one run of `fail_steps` (unless a size run already went that far)."""
        longest = max(self.finished)
        run = self.finished[longest]
        if run.error is None:
            if longest >= self.options.fail_steps:
                return {"steps": None, "error": None, "tried": longest}
            run = await self._run(self.options.fail_steps)
            if run.error is None:
                log(self.name, f"{self.options.fail_steps} steps completed")
                return {"steps": None, "error": None, "tried": self.options.fail_steps}
        steps = await completed_steps(self.client, run.workflow_id)
        size, _, _ = await history_bytes(self.client, run.workflow_id)
        text = failure_text(run.error)
        log(self.name, f"failed after {steps} steps ({size:,} B of history): {text}")
        return {"steps": steps, "error": text, "history_bytes": size}

    async def rebuild(self) -> dict[str, Any]:
        steps = self.options.rebuild_steps
        if not self.system.rebuilds:
            return {"seconds": None, "note": "no per-step state to rebuild"}
        if any(r.error for r in self.finished.values()):
            return {"seconds": None, "note": f"no {steps}-step run (fails before)"}
        run = self.finished.get(steps) or await self._run(steps)
        if run.error is not None:
            return {"seconds": None, "note": f"no {steps}-step run (fails before)"}
        started = time.perf_counter()
        rebuilt = await self.system.rebuild(self.client, run.workflow_id)
        seconds = time.perf_counter() - started
        log(self.name, f"rebuilt {rebuilt} states of a {steps}-step run in {seconds:.1f}s")
        return {"seconds": seconds, "note": f"{rebuilt} states"}


def log(name: str, text: str) -> None:
    print(f"  [{name}] {text}", flush=True)


def parse_options(description: str) -> Options:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--address", required=True, help="Temporal frontend host:port")
    parser.add_argument("--model-url", required=True, help="offline model base URL (…/v1)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--size-steps", default=",".join(map(str, SIZE_STEPS)))
    parser.add_argument("--fail-steps", type=int, default=400)
    parser.add_argument("--rebuild-steps", type=int, default=500)
    args = parser.parse_args()
    return Options(
        address=args.address,
        model_url=args.model_url,
        steps=args.steps,
        concurrent=args.concurrent,
        size_steps=tuple(int(n) for n in args.size_steps.split(",")),
        fail_steps=args.fail_steps,
        rebuild_steps=args.rebuild_steps,
    )


def report(figures: dict[str, Any]) -> None:
    """The orchestrator reads the last line that carries the mark."""
    print(RESULT_MARK + json.dumps(figures), flush=True)


def run_figures(name: str, system: TemporalSystem, options: Options) -> dict[str, Any]:
    return asyncio.run(temporal_figures(name, system, options))
