"""Past one worker: many runs at once on one worker, many runs waiting for approval in one
worker's memory, and a fleet of three workers on PostgreSQL, each with its own data dir as
on three machines (the payment provider shared, as a real one is), one SIGKILLed every
few seconds while runs go through.

    python -m bench.scale [--at-once 200] [--waiting 300 --cache 100] [--fleet-runs 200]
    python -m bench.scale --at-once 1000 --waiting 10000 --cache 1000 --fleet-runs 200

Small by default; the second line is the full size. Workers run in processes of their
own (their RSS is read from /proc). Prints the figures and writes bench/results/scale.txt.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.harness import bench_services, bench_settings
from bench.report import RESULTS_DIR
from bench.systems.common import at_least, positive
from durable_agents.control import runs
from durable_agents.examples.providers import Providers
from durable_agents.infra.stack import settings_env, worker_polling
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from durable_agents.workflows.records import RunStatus

POSTGRES_URL = os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def spawn(settings: Settings, log: Path, **env: str) -> subprocess.Popen[bytes]:
    full = {**os.environ, **settings_env(settings), "AGENT_METRICS_PORT": "0", **env}
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "durable_agents.worker"],
            env=full,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


@asynccontextmanager
async def worker_process(settings: Settings, log: Path, **env: str) -> AsyncIterator[int]:
    process = spawn(settings, log, **env)
    try:
        for _ in range(300):
            if await worker_polling(settings):
                break
            await asyncio.sleep(0.1)
        yield process.pid
    finally:
        process.terminate()
        with suppress(subprocess.TimeoutExpired):
            process.wait(30)
        if process.poll() is None:
            process.kill()


async def step_latencies(client: Client, run_id: str) -> list[float]:
    """Seconds between one tool's completion and the next: a step as its run lived it."""
    history = await client.get_workflow_handle(run_id).fetch_history()
    done = [
        e.event_time.ToDatetime().timestamp()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    ]
    return [b - a for a, b in itertools.pairwise(done)]


async def at_once(client: Client, settings: Settings, count: int, steps: int, log: Path) -> str:
    request = RunRequest.model_validate(
        {
            "goal": f"bench {steps} steps",
            "scenario": f"long?steps={steps}&reply_bytes=1024",
            "limits": {"context": "step"},
        }
    )
    async with worker_process(settings, log) as pid:
        ids = [f"scale-{uuid.uuid4().hex[:10]}" for _ in range(count)]
        started = time.perf_counter()
        await asyncio.gather(*(runs.start_run(client, settings, request, rid) for rid in ids))
        peak = 0.0

        async def watch() -> None:
            nonlocal peak
            while True:
                peak = max(peak, rss_mb(pid))
                await asyncio.sleep(0.5)

        watcher = asyncio.create_task(watch())
        outcomes = await asyncio.gather(*(runs.wait_for_outcome(client, rid) for rid in ids))
        seconds = time.perf_counter() - started
        watcher.cancel()
    failed = sum(o["status"] != "completed" for o in outcomes)
    sample = ids[:: max(1, count // 100)]
    gaps: list[float] = []
    for rid in sample:
        gaps += await step_latencies(client, rid)
    gaps.sort()
    p50 = statistics.median(gaps)
    p99 = gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))]
    return (
        f"- {count:,} runs of {steps} steps at once on one worker: {count * steps / seconds:.1f} "
        f"steps/s ({seconds:.1f} s), step latency p50 {p50 * 1000:.0f} ms, p99 "
        f"{p99 * 1000:.0f} ms (from {len(sample)} runs' histories), worker RSS peak "
        f"{peak:.0f} MB; {failed} runs not completed"
    )


async def until_waiting(client: Client, run_id: str) -> None:
    for _ in range(3000):
        if (await runs.get_summary(client, run_id)).status == RunStatus.AWAITING_APPROVAL:
            return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{run_id} did not come to wait for approval")


async def waiting(client: Client, settings: Settings, count: int, cache: int, log: Path) -> str:
    request = RunRequest(goal="Pay INV-1001", agent="invoice", label="pay-invoice")
    env = {"AGENT_WORKFLOW_CACHE_SIZE": str(cache)}
    settings = settings.model_copy(update={"task_queue": "scale-waiting"})
    async with worker_process(settings, log, **env) as pid:
        await asyncio.sleep(2)  # the worker's own start settled: what it holds before runs
        before = rss_mb(pid)
        ids = [f"wait-{uuid.uuid4().hex[:10]}" for _ in range(count)]
        started = time.perf_counter()
        for batch in range(0, count, 200):
            chunk = ids[batch : batch + 200]
            await asyncio.gather(*(runs.start_run(client, settings, request, r) for r in chunk))
        for rid in ids:
            await until_waiting(client, rid)
        settle = time.perf_counter() - started
        after = rss_mb(pid)
        # The first run waited longest: past the cache's size, the worker let it go.
        first = ids[0]
        approved = time.perf_counter()
        await runs.approve(client, first, Decision(by="bench"))
        handle = client.get_workflow_handle(first)
        while True:
            described = await handle.describe()
            pending = described.raw_description.pending_activities
            if pending or described.status is None or described.status.name != "RUNNING":
                break
            await asyncio.sleep(0.01)
        resumed = time.perf_counter() - approved
        for rid in ids:
            with suppress(Exception):
                await client.get_workflow_handle(rid).terminate("bench done")
    evicted = "evicted" if count > cache else "cached"
    return (
        f"- {count:,} runs waiting for approval (cache {cache:,}, reached in {settle:.0f} s): "
        f"worker RSS {before:.0f} -> {after:.0f} MB ({(after - before) * 1024 / count:.0f} KB a "
        f"run); an approval to the {evicted} first run's next activity: "
        f"{resumed * 1000:.0f} ms"
    )


async def fleet(client: Client, base: Settings, count: int, kill_every: float, root: Path) -> str:
    schema = f"scale_{uuid.uuid4().hex[:8]}"
    shared = root / "provider"  # the payment provider: someone else's, the same for all
    shared.mkdir(parents=True, exist_ok=True)
    machines: list[Settings] = []
    for i in range(3):
        data_dir = root / f"machine-{i + 1}"
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "providers").symlink_to(shared, target_is_directory=True)
        machines.append(
            base.model_copy(
                update={
                    "data_dir": data_dir,
                    "database_url": POSTGRES_URL,
                    "database_schema": schema,
                    "task_queue": "scale-fleet",
                }
            )
        )
    env = {"AGENT_DATABASE_URL": POSTGRES_URL, "AGENT_DATABASE_SCHEMA": schema}
    workers = [spawn(m, root / f"worker-{i + 1}.log", **env) for i, m in enumerate(machines)]
    for _ in range(300):
        if await worker_polling(machines[0]):
            break
        await asyncio.sleep(0.1)
    request = RunRequest(goal="Pay INV-1001", agent="invoice", label="pay-invoice")
    ids = [f"fleet-{uuid.uuid4().hex[:10]}" for _ in range(count)]
    kills = 0
    chooser = random.Random(7)

    async def approve_all() -> None:
        left = set(ids)
        while left:
            for rid in list(left):
                with suppress(Exception):
                    summary = await runs.get_summary(client, rid)
                    if summary.pending_approvals:
                        await runs.approve(client, rid, Decision(by="bench"))
                        left.discard(rid)
            await asyncio.sleep(0.5)

    async def kill_now_and_then() -> None:
        nonlocal kills
        await asyncio.sleep(2)  # the first kill while the first runs are in flight
        while True:
            i = chooser.randrange(3)
            workers[i].kill()
            workers[i].wait()
            kills += 1
            workers[i] = spawn(machines[i], root / f"worker-{i + 1}.log", **env)
            await asyncio.sleep(kill_every)

    started = time.perf_counter()
    try:
        await asyncio.gather(*(runs.start_run(client, machines[0], request, r) for r in ids))
        helpers = [asyncio.create_task(approve_all()), asyncio.create_task(kill_now_and_then())]
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(runs.wait_for_outcome(client, rid) for rid in ids)), 900
        )
        seconds = time.perf_counter() - started
        for task in helpers:
            task.cancel()
    finally:
        for process in workers:
            process.kill()
            process.wait()
        drop_schema(schema)
    by_run = charges_per_run(Providers.open(machines[0].data_dir).payments.effects())
    duplicates = duplicate_charges(by_run)
    lost = sum(o["status"] != "completed" for o in outcomes)
    return (
        f"- 3 workers on PostgreSQL, each its own data dir, one SIGKILLed 2 s in and every "
        f"{kill_every:g} s after ({kills} kills): {count} pay-invoice runs in {seconds:.0f} s "
        f"({count / seconds * 60:.0f} runs a minute), {len(by_run)} payments at the provider, "
        f"{duplicates} duplicate, {lost} runs lost"
    )


def drop_schema(schema: str) -> None:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def measure(args: argparse.Namespace) -> str:
    lines = [f"# Past one worker ({datetime.now().isoformat(timespec='seconds')})", ""]
    async with bench_services() as services:
        client = services.env.client
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            settings = bench_settings(services.address, services.model_port, root / "one")
            if args.at_once:
                line = await at_once(client, settings, args.at_once, args.steps, root / "a.log")
                print(line, flush=True)
                lines.append(line)
            if args.waiting:
                line = await waiting(client, settings, args.waiting, args.cache, root / "w.log")
                print(line, flush=True)
                lines.append(line)
            if args.fleet_runs:
                line = await fleet(client, settings, args.fleet_runs, args.kill_every, root)
                print(line, flush=True)
                lines.append(line)
    return "\n".join([*lines, ""])


def _seconds(text: str) -> float:
    """Seconds between kills: under half a second the fleet would do nothing but restart."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0.5:  # NaN too
        raise argparse.ArgumentTypeError(f"must be 0.5 or more: {text!r}")
    return value


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scale.py", description=__doc__)
    runs_or_none = at_least(0)  # 0 skips the part
    one_or_more = positive
    parser.add_argument("--at-once", type=runs_or_none, default=200, help="runs at once")
    parser.add_argument("--steps", type=one_or_more, default=5, help="steps of each of those")
    parser.add_argument("--waiting", type=runs_or_none, default=300, help="runs left waiting")
    parser.add_argument("--cache", type=one_or_more, default=100, help="the worker's cache")
    parser.add_argument("--fleet-runs", type=runs_or_none, default=200, help="fleet's runs")
    parser.add_argument(
        "--kill-every",
        type=_seconds,
        default=10.0,
        help="seconds between kills",
    )
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    return parser


def main() -> None:
    args = arguments().parse_args()
    text = asyncio.run(measure(args))
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "scale.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()


def charges_per_run(effects: list[dict[str, Any]]) -> dict[str, int]:
    """How many charges the payment provider recorded for each run (by workflow id, so a
    run's continue-as-new chain and its retries count as one run)."""
    by_run: dict[str, int] = {}
    for effect in effects:
        if effect["operation"] == "charge":
            key = str(effect["run_id"]).partition("@")[0]
            by_run[key] = by_run.get(key, 0) + 1
    return by_run


def duplicate_charges(by_run: dict[str, int]) -> int:
    """The charges beyond each run's first: what "0 duplicates" in docs/operations.md counts."""
    return sum(n - 1 for n in by_run.values() if n > 1)
