"""Steps per second: our agent against raw Temporal doing the same activities per step.

Each step is one model activity and one tool activity in both. Ours runs the `long`
scenario (1 KB replies) through the offline model over HTTP with a step-scoped context.
Usage: python -m bench.throughput [--steps 100] [--concurrent 20]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from temporalio.worker import Worker

from bench.harness import Bench, bench_stack
from bench.raw_workflow import RawWorkflow, raw_model, raw_tool
from starters import runs
from workflows.contracts import RunRequest

RAW_QUEUE = "bench-raw"


async def raw_runs(bench: Bench, count: int, steps: int) -> float:
    started = time.perf_counter()
    await asyncio.gather(
        *(
            bench.client.execute_workflow(
                RawWorkflow.run, steps, id=f"raw-{uuid.uuid4().hex[:8]}", task_queue=RAW_QUEUE
            )
            for _ in range(count)
        )
    )
    return count * steps / (time.perf_counter() - started)


async def agent_runs(bench: Bench, count: int, steps: int) -> float:
    request = RunRequest.model_validate(
        {
            "goal": "throughput",
            "scenario": f"long?steps={steps}&reply_bytes=1024",
            "limits": {"context": "step"},
        }
    )
    started = time.perf_counter()
    ids = [
        (await runs.start_run(bench.client, bench.settings, request)).run_id for _ in range(count)
    ]
    outcomes = await asyncio.gather(*(runs.wait_for_outcome(bench.client, i) for i in ids))
    if any(o["status"] != "completed" for o in outcomes):
        raise SystemExit(f"a run did not complete: {outcomes}")
    return count * steps / (time.perf_counter() - started)


async def measure(steps: int, concurrent: int) -> dict[str, float]:
    async with bench_stack() as bench:
        raw_worker = Worker(
            bench.client,
            task_queue=RAW_QUEUE,
            workflows=[RawWorkflow],
            activities=[raw_model, raw_tool],
        )
        async with raw_worker:
            per_run = max(1, steps // concurrent)
            return {
                "raw, 1 run": await raw_runs(bench, 1, steps),
                "ours, 1 run": await agent_runs(bench, 1, steps),
                f"raw, {concurrent} runs": await raw_runs(bench, concurrent, per_run),
                f"ours, {concurrent} runs": await agent_runs(bench, concurrent, per_run),
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--concurrent", type=int, default=20)
    args = parser.parse_args()
    figures = asyncio.run(measure(args.steps, args.concurrent))
    print(f"steps per second ({args.steps} steps; 2 activities per step)")
    for name, value in figures.items():
        print(f"  {name:<16} {value:6.1f}")
    single = figures["ours, 1 run"] / figures["raw, 1 run"]
    many = figures[f"ours, {args.concurrent} runs"] / figures[f"raw, {args.concurrent} runs"]
    print(f"ours / raw: {single:.2f} for one run, {many:.2f} for {args.concurrent} runs")


if __name__ == "__main__":
    main()
