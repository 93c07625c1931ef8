"""10,000 runs waiting for a person on one worker, with the default stores and cache.

Starts N pay-invoice runs (--runs, 10,000 by default) on one worker in a process of its
own, waits until Temporal's visibility shows every one waiting for approval, and prints:
the worker's memory per waiting run (and per run it holds in its cache), the time to
start them all, the time for a decision to reach a run the cache let go (its next
activity scheduled), then approves every run and prints the drain.

Progress is read from visibility (a count by AgentStatus), never by querying the runs: a
query to a run out of the cache replays its history, which is the cost being measured.

    python -m bench.waiting_runs [--runs 10000] [--cache N]

--cache is left out to measure the default (AGENT_WORKFLOW_CACHE_SIZE, 1,000 runs).
Prints as it goes and writes bench/results/waiting-runs.txt.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

from temporalio.client import Client

from bench.harness import bench_services, bench_settings
from bench.report import RESULTS_DIR
from bench.scale import rss_mb, worker_process
from bench.systems.common import positive
from durable_agents.control import runs
from durable_agents.runtime.settings import Settings
from durable_agents.workflows import search_attributes as sa
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from durable_agents.workflows.records import RunStatus

START_BATCH = 200  # starts in flight at once: the client's, not the worker's, limit
DRAIN_WAVE = 500  # approvals in flight at once: within the default cache of 1,000
QUEUE = "bench-waiting"


def log(text: str) -> None:
    print(f"[waiting-runs] {text}", flush=True)


async def count(client: Client, status: RunStatus, prefix: str) -> int:
    query = f"{sa.STATUS.name} = '{status.value}' AND WorkflowId STARTS_WITH '{prefix}'"
    return (await client.count_workflows(query)).count


async def until_counted(
    client: Client, status: RunStatus, prefix: str, wanted: int, what: str
) -> float:
    """Seconds until visibility shows `wanted` runs with this status, logging progress."""
    started = time.perf_counter()
    last_log = 0.0
    while True:
        now = await count(client, status, prefix)
        elapsed = time.perf_counter() - started
        if now >= wanted:
            return elapsed
        if elapsed - last_log >= 30:
            last_log = elapsed
            log(f"{what}: {now:,} of {wanted:,} ({elapsed:.0f} s)")
        await asyncio.sleep(1.0)


async def next_activity_after(client: Client, run_id: str, decision: Decision) -> float:
    """Seconds from a decision sent to the run's next activity scheduled (it reached it)."""
    handle = client.get_workflow_handle(run_id)
    sent = time.perf_counter()
    await runs.approve(client, run_id, decision)
    while True:
        described = await handle.describe()
        if described.raw_description.pending_activities or (
            described.status is not None and described.status.name != "RUNNING"
        ):
            return time.perf_counter() - sent
        await asyncio.sleep(0.005)


async def start_all(client: Client, settings: Settings, ids: list[str], prefix: str) -> None:
    """Start the runs in waves of START_BATCH, each once the last is waiting: runs come to a
    desk over time, and a wave past the cache's size would have every run of it evicted
    and replayed between its own first steps, which is not what waiting costs."""
    request = RunRequest(goal="Pay INV-1001", agent="invoice", label="pay-invoice")
    for at in range(0, len(ids), START_BATCH):
        batch = ids[at : at + START_BATCH]
        await asyncio.gather(*(runs.start_run(client, settings, request, r) for r in batch))
        started = at + len(batch)
        await until_counted(client, RunStatus.AWAITING_APPROVAL, prefix, started, "waiting")


async def approve_all(client: Client, ids: list[str], prefix: str) -> None:
    """Approve the runs in waves of DRAIN_WAVE, each once the last completed: a wave
    within the cache's size goes through at the worker's pace; approving more runs at once
    than the cache holds has each evicted between its own steps, replaying its history at
    every one (10,000 at once on a 1,000-run cache: 81 runs completed in 121 s)."""
    for at in range(0, len(ids), DRAIN_WAVE):
        wave = ids[at : at + DRAIN_WAVE]
        await asyncio.gather(*(runs.approve(client, r, Decision(by="bench")) for r in wave))
        done = at + len(wave) + 1  # the first run, approved before the drain
        await until_counted(client, RunStatus.COMPLETED, prefix, done, "completed")


async def measure(total: int, cache: int | None) -> list[str]:
    prefix = f"wait-{uuid.uuid4().hex[:6]}-"
    ids = [f"{prefix}{i:05d}" for i in range(total)]
    env = {} if cache is None else {"AGENT_WORKFLOW_CACHE_SIZE": str(cache)}
    async with bench_services() as services:
        client = services.env.client
        with tempfile.TemporaryDirectory() as tmp:
            settings = bench_settings(
                services.address, services.model_port, Path(tmp), task_queue=QUEUE
            )
            cache_size = cache if cache is not None else settings.workflow_cache_size
            log(f"{total:,} runs, worker cache {cache_size:,} runs, default stores (SQLite)")
            async with worker_process(settings, Path(tmp) / "worker.log", **env) as pid:
                await asyncio.sleep(2)  # the worker's own start settled
                before = rss_mb(pid)
                started = time.perf_counter()
                await start_all(client, settings, ids, prefix)
                to_wait = time.perf_counter() - started
                log(f"{total:,} runs waiting after {to_wait:.0f} s")
                await asyncio.sleep(2)  # the last tasks' memory settled
                after = rss_mb(pid)
                # The first run has waited longest: past the cache's size, it was let go.
                reach = await next_activity_after(client, ids[0], Decision(by="bench"))
                log(f"a decision reached the first run's next activity in {reach * 1000:.0f} ms")
                log(f"worker RSS {before:.0f} -> {after:.0f} MB with {total:,} runs waiting")
                drained = time.perf_counter()
                await approve_all(client, ids[1:], prefix)
                drain = time.perf_counter() - drained
                peak = rss_mb(pid)
    grown = after - before
    held = min(total, cache_size)
    return [
        f"# {total:,} runs waiting for a person on one worker "
        f"({datetime.now().isoformat(timespec='seconds')})",
        "",
        f"- worker cache: {cache_size:,} runs (AGENT_WORKFLOW_CACHE_SIZE); default stores (SQLite)",
        f"- started and waiting in {to_wait:.0f} s ({total / to_wait:.0f} runs/s, in waves of "
        f"{START_BATCH}, each once the last waited)",
        f"- worker RSS {before:.0f} -> {after:.0f} MB: {grown * 1024 / total:.1f} KB per waiting "
        f"run; {grown * 1024 / held:.0f} KB per run held in the cache ({held:,})",
        f"- a decision to the first run ({'let go by' if total > cache_size else 'held in'} "
        f"the cache) reached its next activity in {reach * 1000:.0f} ms",
        f"- approving all, in waves of {DRAIN_WAVE} each once the last completed: all "
        f"{total:,} completed in {drain:.0f} s ({total / drain:.0f} runs/s); worker RSS then "
        f"{peak:.0f} MB",
        "",
    ]


MAX_RUNS = 100_000  # ids are made before anything starts: a typo's 10**9 is refused


def run_count(text: str) -> int:
    """An argparse type: 1 to MAX_RUNS runs."""
    value = positive(text)
    if value > MAX_RUNS:
        raise argparse.ArgumentTypeError(f"must be {MAX_RUNS:,} or fewer: {text!r}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(prog="waiting_runs.py", description=__doc__)
    parser.add_argument("--runs", type=run_count, default=10_000, help="runs left waiting")
    parser.add_argument("--cache", type=positive, default=None, help="the worker's cache")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    lines = asyncio.run(measure(args.runs, args.cache))
    text = "\n".join(lines)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "waiting-runs.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
