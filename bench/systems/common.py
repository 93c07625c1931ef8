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
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import History
from temporalio.client import Client, WorkflowFailureError

from bench.actions import billable_actions
from bench.cpu import own_cpu_seconds, own_rss_bytes, process_cpu_seconds
from bench.harness import history_bytes
from durable_agents.control.timeline import fetch_chain

SIZE_STEPS = (10, 50, 100, 200)
# The `loop` scenario's one tool, as a system that writes its own request declares it.
LOOP_TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": "record_progress",
        "description": "Record that a work item is done.",
        "parameters": {
            "type": "object",
            "properties": {"step": {"type": "integer"}, "note": {"type": "string"}},
            "required": ["step", "note"],
        },
    },
}
RESULT_MARK = "BENCH-RESULT "
# The cost per step: one run of 200 steps alone, then 20 runs of 100 at once.
COST_RUNS = "200x1,100x20"
PHASES = ("throughput", "cost", "sizes", "failure", "rebuild", "waiting", "travel")
WAITING_RUNS = 500  # runs waiting for a person at once, each held in the worker's cache
WARM_UP_RUNS = 20
TRAVEL_STEPS = 2000  # the continue-as-new chain `history --step K` is timed on


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
    server_pid: int | None = None  # the dev server's, for its CPU per step
    phases: tuple[str, ...] = PHASES
    cost_runs: tuple[tuple[int, int], ...] = ((200, 1), (100, 20))  # (steps, runs at once)
    waiting_runs: int = WAITING_RUNS
    travel_steps: int = TRAVEL_STEPS

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


@runtime_checkable
class WaitingSystem(Protocol):
    """A system whose runs can wait for a person: what one waiting run costs the worker."""

    async def start_waiting(self, client: Client, options: Options, workflow_id: str) -> None:
        """Start a run and return once it waits (its first workflow tasks done)."""


@runtime_checkable
class TravellingSystem(Protocol):
    """A system with time travel through a long run."""

    async def travel(self, client: Client, measuring: Measuring) -> dict[str, Any]: ...


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
    """Each phase's figures; a phase that fails (a peer past the history limit in the cost
    phase, say) is recorded as failing there, and the other phases' figures are kept."""
    client = await system.connect(options)
    measuring = Measuring(name, system, client, options)
    figures: dict[str, Any] = {"system": name}
    failed: dict[str, str] = {}
    wanted = set(options.phases)

    async def phase(label: str, measure: Callable[[], Awaitable[None]]) -> None:
        try:
            await measure()
        except Exception as err:  # a peer's own failure, whatever it raises
            failed[label] = failure_text(err)[:300]
            log(name, f"{label} failed: {failed[label]}")

    async def throughput() -> None:
        figures["steps_per_s_1"] = await measuring.throughput(1)
        figures["steps_per_s_many"] = await measuring.throughput(options.concurrent)

    async def cost() -> None:
        figures["cost"] = await measuring.cost()

    async def sizes() -> None:
        figures["bytes_per_step"], figures["chain_runs"] = await measuring.sizes()

    async def failure() -> None:
        figures["fails_at"] = await measuring.failure()

    async def rebuild() -> None:
        figures["rebuild"] = await measuring.rebuild()

    async with system.worker(client, options):
        if "throughput" in wanted:
            await phase("throughput", throughput)
        if "cost" in wanted:
            await phase("cost", cost)
        if wanted & {"sizes", "failure", "rebuild"}:
            await phase("sizes", sizes)
        if "failure" in wanted:
            await phase("failure", failure)
        if "rebuild" in wanted:
            await phase("rebuild", rebuild)
        if "waiting" in wanted and isinstance(system, WaitingSystem):
            waiting = system

            async def wait() -> None:
                figures["waiting"] = await measuring.waiting(waiting)

            await phase("waiting", wait)
        if "travel" in wanted and isinstance(system, TravellingSystem):
            travelling = system

            async def travel() -> None:
                figures["travel"] = await travelling.travel(client, measuring)

            await phase("travel", travel)
    figures["peak_rss_mb"] = peak_rss_mb()
    if failed:
        figures["failed_phases"] = failed
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

    async def cost(self) -> dict[str, Any]:
        """Per step, over one run of 200 steps and then 20 runs of 100 at once: billable
        actions (bench/actions.py), history events and stored bytes, this process's CPU
        (the worker; the client only starts runs and awaits them) and the dev server's."""
        server = self.options.server_pid
        started_cpu = own_cpu_seconds()
        started_server = process_cpu_seconds(server) if server else 0.0
        runs: list[tuple[str, int]] = []
        for steps, count in self.options.cost_runs:
            batch = [(new_id(self.name), steps) for _ in range(count)]
            await asyncio.gather(
                *(self.system.run(self.client, self.options, n, run_id) for run_id, n in batch)
            )
            runs += batch
        worker_cpu = own_cpu_seconds() - started_cpu
        server_cpu = process_cpu_seconds(server) - started_server if server else None
        steps = sum(n for _, n in runs)
        actions: Counter[str] = Counter()
        event_bytes: Counter[str] = Counter()
        events = size = 0
        for run_id, _ in runs:
            for _, history in await fetch_chain(self.client, run_id):
                actions += billable_actions(history.events)
                events += len(history.events)
                size += History(events=history.events).ByteSize()
                for event in history.events:
                    kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
                    event_bytes[kind] += event.ByteSize()
        figures = {
            "steps": steps,
            "runs": len(runs),
            "batches": self.options.cost_runs,
            "actions": actions.total() / steps,
            "actions_by_kind": {k: v / steps for k, v in actions.most_common()},
            "events": events / steps,
            "bytes": size / steps,
            "bytes_by_event": {k: v / steps for k, v in event_bytes.most_common()},
            "worker_cpu_ms": worker_cpu * 1000 / steps,
            "server_cpu_ms": server_cpu * 1000 / steps if server_cpu is not None else None,
        }
        log(
            self.name,
            f"cost over {steps} steps: {figures['actions']:.3f} actions, "
            f"{figures['events']:.2f} events, {figures['bytes']:,.0f} B, "
            f"worker {figures['worker_cpu_ms']:.2f} CPU-ms, server "
            + (f"{figures['server_cpu_ms']:.2f} CPU-ms" if server_cpu is not None else "-")
            + " per step",
        )
        return figures

    async def waiting(self, system: WaitingSystem) -> dict[str, Any]:
        """Resident memory the worker grows by per run waiting in its cache, over 500 runs
        (--waiting-runs) started after up to 20 that warm the code paths up; all are
        terminated after."""

        async def start(count: int) -> list[str]:
            ids = [new_id(f"{self.name}-wait") for _ in range(count)]
            for at in range(0, count, 50):  # 50 at a time: the server is not flooded
                await asyncio.gather(
                    *(system.start_waiting(self.client, self.options, i) for i in ids[at : at + 50])
                )
            return ids

        count = self.options.waiting_runs
        warm = await start(min(WARM_UP_RUNS, count))
        before = own_rss_bytes()
        measured = await start(count)
        after = own_rss_bytes()
        for at in range(0, len(warm + measured), 50):
            await asyncio.gather(
                *(
                    self.client.get_workflow_handle(i).terminate("benchmark done")
                    for i in (warm + measured)[at : at + 50]
                )
            )
        figures = {
            "runs": count,
            "kb_per_run": (after - before) / count / 1024,
            "rss_before_mb": before / 2**20,
            "rss_after_mb": after / 2**20,
        }
        log(
            self.name,
            f"{count} runs waiting: {figures['rss_before_mb']:.0f} -> "
            f"{figures['rss_after_mb']:.0f} MB, {figures['kb_per_run']:.0f} KB per run",
        )
        return figures

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

    async def finished_run(self, steps: int) -> str:
        """The workflow id of a completed run of this many steps: one the sizes phase ran,
        else a new one."""
        run = self.finished.get(steps)
        if run is None or run.error is not None:
            run = self.finished[steps] = await self._run(steps)
        if run.error is not None:
            raise RuntimeError(f"no {steps}-step run: {failure_text(run.error)}")
        return run.workflow_id

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


def at_least(least: int) -> Callable[[str], int]:
    """An argparse type: a whole number, `least` or more."""

    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be {least} or more: {text!r}")
        return value

    count.__name__ = "count"  # argparse names the type in its error
    return count


# A count of steps or runs: 0 or less would measure nothing (and divide by it).
positive = at_least(1)


def cost_runs(text: str) -> tuple[tuple[int, int], ...]:
    """'200x1,100x20' -> ((200, 1), (100, 20))."""
    try:
        runs = tuple(
            (int(steps), int(count))
            for steps, _, count in (part.partition("x") for part in text.split(","))
        )
    except ValueError:
        raise argparse.ArgumentTypeError(f"--cost-runs wants STEPSxRUNS,...: {text!r}") from None
    if not runs or any(steps < 1 or count < 1 for steps, count in runs):
        raise argparse.ArgumentTypeError(f"--cost-runs wants positive numbers: {text!r}")
    return runs


def phases(text: str) -> tuple[str, ...]:
    """'cost,travel' -> ('cost', 'travel'); a phase misspelt would be skipped in silence."""
    named = tuple(text.split(","))
    unknown = [name for name in named if name not in PHASES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"no phase {', '.join(map(repr, unknown))}: choose from {','.join(PHASES)}"
        )
    return named


def _kept_as_text(check: Callable[[str], object]) -> Callable[[str], str]:
    """An argument checked when parsed and kept as given, so it passes on as it came."""

    def checked(text: str) -> str:
        check(text)
        return text

    checked.__name__ = check.__name__  # argparse names the type in its error
    return checked


# The knobs the orchestrator checks and passes on to every system: (flag, default, type,
# help); the systems read --cost-runs and --phases with cost_runs() and phases().
SCALE_ARGUMENTS: tuple[tuple[str, Any, Callable[[str], Any], str], ...] = (
    ("--steps", 100, positive, "steps per run for steps/s"),
    ("--concurrent", 20, positive, "runs at once for steps/s"),
    ("--fail-steps", 400, positive, "how far to push for a failure"),
    ("--rebuild-steps", 500, positive, "the run whose every state is rebuilt"),
    ("--phases", ",".join(PHASES), _kept_as_text(phases), "what to measure (default: all)"),
    ("--cost-runs", COST_RUNS, _kept_as_text(cost_runs), "STEPSxRUNS,...: the cost's runs"),
    ("--waiting-runs", WAITING_RUNS, positive, "runs left waiting, for memory per run"),
    ("--travel-steps", TRAVEL_STEPS, positive, "the chain `history --step` is timed on"),
)


def add_scale_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, default, kind, text in SCALE_ARGUMENTS:
        parser.add_argument(flag, type=kind, default=default, help=text)


def parse_options(description: str) -> Options:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--address", required=True, help="Temporal frontend host:port")
    parser.add_argument("--model-url", required=True, help="offline model base URL (…/v1)")
    parser.add_argument("--size-steps", default=",".join(map(str, SIZE_STEPS)))
    parser.add_argument("--server-pid", type=int, help="the dev server's, for its CPU")
    add_scale_arguments(parser)
    args = parser.parse_args()
    return Options(
        address=args.address,
        model_url=args.model_url,
        steps=args.steps,
        concurrent=args.concurrent,
        size_steps=tuple(int(n) for n in args.size_steps.split(",")),
        fail_steps=args.fail_steps,
        rebuild_steps=args.rebuild_steps,
        server_pid=args.server_pid,
        phases=phases(args.phases),
        cost_runs=cost_runs(args.cost_runs),
        waiting_runs=args.waiting_runs,
        travel_steps=args.travel_steps,
    )


def report(figures: dict[str, Any]) -> None:
    """The orchestrator reads the last line that carries the mark."""
    print(RESULT_MARK + json.dumps(figures), flush=True)


def run_figures(name: str, system: TemporalSystem, options: Options) -> dict[str, Any]:
    return asyncio.run(temporal_figures(name, system, options))
