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
    skip: set[str] = field(default_factory=set)

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
    figures: dict[str, Any] = {"system": name}
    async with system.worker(client, options):

        async def one(steps: int) -> None:
            await system.run(client, options, steps, new_id(name))

        figures["steps_per_s_1"] = await steps_per_second(one, 1, options.steps)
        log(name, f"1 run: {figures['steps_per_s_1']:.1f} steps/s")
        figures["steps_per_s_many"] = await steps_per_second(one, options.concurrent, options.steps)
        log(name, f"{options.concurrent} runs: {figures['steps_per_s_many']:.1f} steps/s")
        sizes, chains, finished = await _sizes(name, system, client, options)
        figures["bytes_per_step"] = sizes
        figures["chain_runs"] = chains
        figures["fails_at"] = await _failure(name, system, client, options, finished)
        figures["rebuild"] = await _rebuild(name, system, client, options, finished)
    figures["peak_rss_mb"] = peak_rss_mb()
    return figures


@dataclass
class SizedRun:
    workflow_id: str
    error: WorkflowFailureError | None = None


async def _sizes(
    name: str, system: TemporalSystem, client: Client, options: Options
) -> tuple[dict[int, float], dict[int, int], dict[int, SizedRun]]:
    """History bytes per step by run length (and the runs in its continue-as-new chain),
    stopping at the first run that fails."""
    sizes: dict[int, float] = {}
    chains: dict[int, int] = {}
    finished: dict[int, SizedRun] = {}
    for steps in sorted(options.size_steps):
        run = finished[steps] = SizedRun(new_id(name))
        try:
            await system.run(client, options, steps, run.workflow_id)
        except WorkflowFailureError as err:
            run.error = err
            break
        size, _, chain = await history_bytes(client, run.workflow_id)
        sizes[steps], chains[steps] = size / steps, chain
        log(name, f"{steps} steps: {size / steps:,.0f} B/step ({size:,} B, {chain} run(s))")
    return sizes, chains, finished


async def _failure(
    name: str,
    system: TemporalSystem,
    client: Client,
    options: Options,
    finished: dict[int, SizedRun],
) -> dict[str, Any]:
    """The step count at which a run fails: from a size run that failed, or else from one
    run of `fail_steps` (unless a size run already went that far)."""
    longest = max(finished)
    run = finished[longest]
    if run.error is None:
        if longest >= options.fail_steps:
            return {"steps": None, "error": None, "tried": longest}
        run = SizedRun(new_id(name))
        try:
            await system.run(client, options, options.fail_steps, run.workflow_id)
            log(name, f"{options.fail_steps} steps completed")
            return {"steps": None, "error": None, "tried": options.fail_steps}
        except WorkflowFailureError as err:
            run.error = err
    steps = await completed_steps(client, run.workflow_id)
    size, _, _ = await history_bytes(client, run.workflow_id)
    text = failure_text(run.error)
    log(name, f"failed after {steps} steps ({size:,} B of history): {text}")
    return {"steps": steps, "error": text, "history_bytes": size}


async def _rebuild(
    name: str,
    system: TemporalSystem,
    client: Client,
    options: Options,
    finished: dict[int, SizedRun],
) -> dict[str, Any]:
    steps = options.rebuild_steps
    if not system.rebuilds:
        return {"seconds": None, "note": "no per-step state to rebuild"}
    run = finished.get(steps) or SizedRun(new_id(name))
    if any(r.error for r in finished.values()):
        return {"seconds": None, "note": f"no {steps}-step run (fails before)"}
    if steps not in finished:
        await system.run(client, options, steps, run.workflow_id)
    started = time.perf_counter()
    rebuilt = await system.rebuild(client, run.workflow_id)
    seconds = time.perf_counter() - started
    log(name, f"rebuilt {rebuilt} states of a {steps}-step run in {seconds:.1f}s")
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
