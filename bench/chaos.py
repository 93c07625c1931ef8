"""Chaos run: many pay-invoice runs while workers are SIGKILLed and the Temporal dev server
is restarted once on the same SQLite file. Then it counts, from the providers' side and the
model server's side, what was lost, done twice, or paid for twice.

The faults land by construction, not by luck: runs start in waves, and each wave's first
model call at step 1 is held by the offline model (a delay fault); once every run of the
wave sits in that call, every worker is SIGKILLed, so each planned kill interrupts
activities in flight. Runs are then held at their approvals until the dev server has
been restarted; only then are they approved, while random kills go on.

Usage: python -m bench.chaos [--runs 200] [--seed 7]   (make chaos)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from temporalio.client import Client
from tenacity import AsyncRetrying, stop_after_attempt, wait_fixed

from durable_agents.activities.stores import Stores
from durable_agents.control import runs
from durable_agents.examples.providers import Providers
from durable_agents.infra import stack
from durable_agents.infra.offline_model.embedded import free_port
from durable_agents.infra.processes import ProcessSpec, stop, stop_strays
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from durable_agents.workflows.records import workflow_id_of

T = TypeVar("T")
EFFECTS_PER_RUN = 3  # draft_email, pay_invoice, send_email


# How long the offline model holds each run's first step-1 call: far longer than a kill
# takes to land; the retry after the kill is not held (the fault fires once per run).
HELD_CALL_SECONDS = 10


@dataclass
class ChaosConfig:
    runs: int = 200
    workers: int = 2
    planned_kills: int = 3  # each one kills every worker while calls are in flight
    # Random kills once runs are approved (None: none beyond the planned ones).
    kill_every: tuple[float, float] | None = (0.5, 2.0)
    drain_timeout: float = 900.0
    seed: int = 7


# The size CI runs (tests/integration/test_chaos.py) and bench/chaos_repeat.py repeats.
CI_CHAOS = ChaosConfig(runs=10, planned_kills=3, kill_every=(1.0, 2.0), seed=11, drain_timeout=300)


@dataclass
class ChaosReport:
    started: int = 0
    completed: int = 0
    failed: int = 0
    lost: int = 0
    kills: int = 0
    kills_in_flight: int = 0  # planned kills, each while model calls were in flight
    # Activity attempts that did not finish and were retried, read from the histories: the
    # proof that kills interrupted work, whatever the kill loop believed.
    interrupted_activities: int = 0
    server_restarts: int = 0
    effects: int = 0
    duplicate_effects: int = 0
    runs_missing_effects: int = 0
    model_calls_paid_twice: int = 0
    model_calls_abandoned: int = 0  # held calls whose worker died: never served
    drain_seconds: float = 0.0
    elapsed_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def judge(self, config: ChaosConfig, min_kills: int) -> None:
        checks = {
            "runs lost": self.lost,
            "runs failed": self.failed,
            "duplicate effects": self.duplicate_effects,
            "runs missing effects": self.runs_missing_effects,
            "model calls paid twice": self.model_calls_paid_twice,
        }
        self.problems = [f"{name}: {count}" for name, count in checks.items() if count]
        if self.kills_in_flight < min_kills or self.interrupted_activities < min_kills:
            self.problems.append(
                f"only {self.kills_in_flight} kills landed while runs were in flight and "
                f"{self.interrupted_activities} activities were interrupted (needs "
                f"{min_kills}): the faults did not happen, so nothing is proven"
            )
        if self.server_restarts < 1:
            self.problems.append("the dev server was not restarted")

    def lines(self) -> list[str]:
        return [
            f"runs started              {self.started}",
            f"runs completed            {self.completed}",
            f"runs failed               {self.failed}",
            f"runs lost                 {self.lost}",
            f"worker kills (SIGKILL)    {self.kills} "
            f"({self.kills_in_flight} planned kills with model calls in flight)",
            f"activities interrupted    {self.interrupted_activities} (retried attempts, "
            "from the histories)",
            f"dev server restarts       {self.server_restarts}",
            f"effects at the providers  {self.effects} "
            f"(duplicates per key: {self.duplicate_effects}, "
            f"runs missing effects: {self.runs_missing_effects})",
            f"model calls paid twice    {self.model_calls_paid_twice} "
            f"({self.model_calls_abandoned} abandoned by killed workers, never served)",
            f"drain after last fault    {self.drain_seconds:.1f} s",
            f"total time                {self.elapsed_seconds:.1f} s",
            "verdict                   "
            + ("PASS" if not self.problems else "FAIL: " + "; ".join(self.problems)),
        ]


class Chaos:
    def __init__(self, config: ChaosConfig, settings: Settings, say=print) -> None:  # type: ignore[no-untyped-def]
        self.config = config
        self.settings = settings
        self.say = say
        self.random = random.Random(config.seed)
        self.report = ChaosReport()
        self.closed: set[str] = set()
        self.run_ids: list[str] = []
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.last_fault = time.monotonic()
        self.drained_at = 0.0
        self.done = asyncio.Event()

    async def run(self) -> ChaosReport:
        began = time.monotonic()
        specs = {spec.name: spec for spec in stack.part_specs(self.settings)}
        await self._start(specs["temporal"], self.say)
        await self._start(specs["model"], self.say)
        try:
            for i in range(self.config.workers):
                await self._start_worker(f"worker-{i + 1}")
            # One client throughout: it reconnects by itself after the server restart.
            self.client = await self._connect()
            await self._start_runs_under_planned_kills(self.client)
            await self._hold_until_all_wait_for_approval()
            await self._restart_server()
            loops = [self._approve(), self._watch()]
            if self.config.kill_every is not None:
                loops.append(self._kill_at_random(self.config.kill_every))
            tasks = [asyncio.create_task(loop) for loop in loops]
            try:
                await asyncio.wait_for(self.done.wait(), self.config.drain_timeout)
            except TimeoutError:
                self.say("drain timeout: counting what is still open as lost")
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            drained = self.drained_at or time.monotonic()
            self.report.drain_seconds = max(0.0, drained - self.last_fault)
            await self._count(self.client)
        finally:
            for name in list(self.workers):
                stop(stack.files_for(self.settings, name))
            stop(stack.files_for(self.settings, "model"))
            stop(stack.files_for(self.settings, "temporal"))
            stray = stop_strays(self.settings.data_dir.resolve())
            if stray:
                self.say(f"killed {len(stray)} stray processes: {stray}")
        self.report.elapsed_seconds = time.monotonic() - began
        return self.report

    async def _start(self, spec: ProcessSpec, say=lambda _: None) -> subprocess.Popen[bytes]:  # type: ignore[no-untyped-def]
        """Start a part; a port still held by the process just killed gets a few retries."""
        return await _retrying(lambda: stack.start_part(spec, self.settings, say), attempts=5)

    async def _connect(self) -> Client:
        return await _retrying(lambda: connect(self.settings), attempts=10)

    async def _start_worker(self, name: str) -> None:
        """One more worker, as the stack starts its own, under its own name."""
        spec = next(s for s in stack.part_specs(self.settings) if s.name == "worker")
        # Several workers on one machine: no metrics endpoint, they would share its port.
        env = spec.env | {"AGENT_METRICS_PORT": "0"}
        self.workers[name] = await self._start(dataclasses.replace(spec, name=name, env=env))

    async def _start_runs_under_planned_kills(self, client) -> None:  # type: ignore[no-untyped-def]
        request = RunRequest.model_validate(
            {
                "goal": "Pay invoice INV-1001 and confirm by email.",
                "scenario": f"pay-invoice?fault=step1:delay={HELD_CALL_SECONDS}",
                "limits": {"model_timeout_seconds": 15, "tool_timeout_seconds": 15},
            }
        )
        waves = max(1, self.config.planned_kills)
        for wave in range(waves):
            share = range(wave * self.config.runs // waves, (wave + 1) * self.config.runs // waves)
            for i in share:
                run_id = f"chaos-{i:04d}"
                await runs.start_run(client, self.settings, request, run_id)
                self.run_ids.append(run_id)
            if wave < self.config.planned_kills:
                await self._wait_for_held_calls(len(self.run_ids))
                await self._kill_every_worker()
        self.report.started = len(self.run_ids)
        self.say(f"started {self.report.started} runs in {waves} waves")

    async def _wait_for_held_calls(self, count: int) -> None:
        """Until `count` runs have entered their held model call (the model counts them)."""
        while self._model_stats()["totals"].get("fault_delay", 0) < count:  # noqa: ASYNC110
            await asyncio.sleep(0.1)  # another process's counter: nothing to await

    async def _kill_every_worker(self) -> None:
        """SIGKILL every worker while held model calls are in flight on them, then restart."""
        for process in self.workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()
                self.report.kills += 1
        self.report.kills_in_flight += 1
        self.last_fault = time.monotonic()
        self.say(f"  killed every worker with {len(self.run_ids)} runs' model calls in flight")
        for name in sorted(self.workers):
            await self._start_worker(name)

    async def _hold_until_all_wait_for_approval(self) -> None:
        """Every run waits for its approval: none can close before the server restart."""
        while True:
            with contextlib.suppress(Exception):
                waiting = await runs.list_waiting(self.client, ("approval",), limit=10_000)
                if len(waiting) >= len(self.run_ids):
                    return
            await asyncio.sleep(0.5)

    async def _approve(self) -> None:
        """A person who approves whatever waits, whether or not a worker is up."""
        approver = Decision(by="chaos-approver", comment="approved during chaos")
        while True:
            with contextlib.suppress(Exception):  # the server may be restarting
                for run in await runs.list_waiting(self.client, ("approval",)):
                    with contextlib.suppress(runs.RunError):
                        await runs.approve(self.client, run.run_id, approver)
            await asyncio.sleep(0.5)

    async def _kill_at_random(self, every: tuple[float, float]) -> None:
        low, high = every
        while True:
            await asyncio.sleep(self.random.uniform(low, high))
            name = self.random.choice(sorted(self.workers))
            process = self.workers[name]
            if process.poll() is not None:
                continue
            process.send_signal(signal.SIGKILL)
            process.wait()
            self.report.kills += 1
            self.last_fault = time.monotonic()
            await asyncio.sleep(self.random.uniform(0.2, 1.0))
            with contextlib.suppress(Exception):
                await self._start_worker(name)

    async def _restart_server(self) -> None:
        self.say(f"restarting the dev server ({len(self.run_ids)} runs held at approval)")
        stop(stack.files_for(self.settings, "temporal"))
        spec = next(s for s in stack.part_specs(self.settings) if s.name == "temporal")
        await self._start(spec)
        self.report.server_restarts += 1
        self.last_fault = time.monotonic()

    def _model_stats(self) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.settings.offline_model_port}/v1/scripted/stats"
        with urllib.request.urlopen(url, timeout=10) as response:
            stats: dict[str, Any] = json.loads(response.read())
        return stats

    async def _watch(self) -> None:
        """Follow the runs to their end and show progress."""
        shown = -1
        while len(self.closed) < len(self.run_ids):
            with contextlib.suppress(Exception):  # the server may be restarting
                async for execution in self.client.list_workflows(
                    "WorkflowType = 'AgentWorkflow' AND ExecutionStatus != 'Running'"
                ):
                    self.closed.add(execution.id)
            if len(self.closed) != shown:
                shown = len(self.closed)
                self.say(
                    f"  {shown}/{len(self.run_ids)} runs closed, {self.report.kills} kills, "
                    f"{self.report.server_restarts} server restarts"
                )
            await asyncio.sleep(1.0)
        self.drained_at = time.monotonic()
        self.done.set()

    async def _count(self, client) -> None:  # type: ignore[no-untyped-def]
        for run_id in self.run_ids:
            outcome = await runs.wait_for_outcome(client, run_id) if run_id in self.closed else {}
            status = outcome.get("status")
            if status == "completed":
                self.report.completed += 1
            elif status is not None:
                self.report.failed += 1
                self.say(f"  {run_id} {status}: {outcome.get('error')}")
            else:
                self.report.lost += 1
        providers = Providers.open(self.settings.data_dir)
        effects = [
            e for p in (providers.payments, providers.email) for e in p.effects() if e["run_id"]
        ]
        per_key = Counter(e["idempotency_key"] for e in effects)
        per_run = Counter(workflow_id_of(e["run_id"]) for e in effects)
        self.report.effects = len(effects)
        self.report.duplicate_effects = sum(n - 1 for n in per_key.values() if n > 1)
        self.report.runs_missing_effects = sum(
            1 for run_id in self.run_ids if per_run[run_id] != EFFECTS_PER_RUN
        )
        self.report.model_calls_paid_twice = self._paid_twice()
        self.report.model_calls_abandoned = self._model_stats()["totals"].get("abandoned", 0)
        self.report.interrupted_activities = await self._interrupted(client)

    async def _interrupted(self, client) -> int:  # type: ignore[no-untyped-def]
        """Activity attempts cut short: each ActivityTaskStarted beyond a first attempt."""
        interrupted = 0
        for run_id in self.run_ids:
            async for event in client.get_workflow_handle(run_id).fetch_history_events():
                if event.HasField("activity_task_started_event_attributes"):
                    interrupted += event.activity_task_started_event_attributes.attempt - 1
        return interrupted

    def _paid_twice(self) -> int:
        """Completions the model served for a (run, seq) after an answer for it was stored."""
        served = self._model_stats()["served"]
        stores = Stores.open(self.settings)
        # Answers are stored under each run's identity, which the model hears as its run.
        keys = [row["run_id"] for row in stores.db.query("SELECT DISTINCT run_id FROM model_calls")]
        stored = {key: stores.transcript.stored_answers(key) for key in keys}
        twice = 0
        for entry in served:
            at = stored.get(entry["run"], {}).get(entry["seq"])
            if at is not None and datetime.fromisoformat(entry["at"]) > datetime.fromisoformat(at):
                twice += 1
        return twice


async def _retrying(start: Callable[[], Awaitable[T]], attempts: int) -> T:
    async for attempt in AsyncRetrying(
        stop=stop_after_attempt(attempts), wait=wait_fixed(1.0), reraise=True
    ):
        with attempt:
            return await start()
    raise AssertionError("unreachable: tenacity re-raises the last error")


def chaos_settings(data_dir: Path) -> Settings:
    return Settings(
        data_dir=data_dir,
        temporal_port=free_port(),
        temporal_ui_port=free_port(),
        offline_model_port=free_port(),
        task_queue="chaos",
        namespace_is_ours_alone=True,  # the chaos run's own dev server: nobody else polls it
    )


async def run_chaos(config: ChaosConfig, data_dir: Path, say=print) -> ChaosReport:  # type: ignore[no-untyped-def]
    report = await Chaos(config, chaos_settings(data_dir), say).run()
    report.judge(config, min_kills=config.planned_kills)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--planned-kills", type=int, default=3)
    args = parser.parse_args()
    config = ChaosConfig(
        runs=args.runs, workers=args.workers, seed=args.seed, planned_kills=args.planned_kills
    )
    with tempfile.TemporaryDirectory(prefix="chaos-") as data_dir:
        report = asyncio.run(run_chaos(config, Path(data_dir)))
    print("\n".join(report.lines()))
    sys.exit(1 if report.problems else 0)


if __name__ == "__main__":
    main()
