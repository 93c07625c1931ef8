"""History bytes per agent step on the `long` scenario: does it stay flat as runs grow?

Prints one row per run length. The peers pass the whole conversation to every model
activity, so theirs grows with the conversation; ours should not.
Usage: python -m bench.history_per_step [--steps 10,100,500] [--reply-bytes 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bench.harness import bench_stack, history_bytes
from durable_agents.control import runs
from durable_agents.workflows.contracts import RunRequest

TARGET_BYTES_PER_STEP = 4096


async def measure(
    step_counts: list[int], reply_bytes: int, context: str = "full"
) -> list[dict[str, float]]:
    rows = []
    async with bench_stack() as bench:
        for steps in step_counts:
            request = RunRequest.model_validate(
                {
                    "goal": f"bench {steps} steps",
                    "scenario": f"long?steps={steps}&reply_bytes={reply_bytes}",
                    "limits": {"context": context},
                }
            )
            started = time.perf_counter()
            run = await runs.start_run(bench.client, bench.settings, request)
            outcome = await runs.wait_for_outcome(bench.client, run.run_id)
            elapsed = time.perf_counter() - started
            if outcome["status"] != "completed":
                raise SystemExit(f"run of {steps} steps ended {outcome}")
            size, events, chain = await history_bytes(bench.client, run.run_id)
            rows.append(
                {
                    "steps": steps,
                    "history_bytes": size,
                    "events": events,
                    "runs": chain,
                    "bytes_per_step": size / steps,
                    "steps_per_second": steps / elapsed,
                }
            )
            print(f"  {steps} steps done in {elapsed:.1f}s", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", default="10,100,500")
    parser.add_argument("--reply-bytes", type=int, default=1024)
    parser.add_argument(
        "--context", choices=("full", "step"), default="full", help="what the model is sent"
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.steps.split(",")]
    print(
        f"history per step, long scenario, {args.reply_bytes}-byte replies, one tool per step, "
        f"{args.context} context"
    )
    rows = asyncio.run(measure(counts, args.reply_bytes, args.context))
    header = f"{'steps':>6} {'history bytes':>14} {'events':>7} {'runs':>5}"
    print(f"{header} {'bytes/step':>11} {'steps/s':>8}")
    for r in rows:
        print(
            f"{r['steps']:>6} {r['history_bytes']:>14,} {r['events']:>7} {r['runs']:>5} "
            f"{r['bytes_per_step']:>11,.0f} {r['steps_per_second']:>8.1f}"
        )
    per_step = [r["bytes_per_step"] for r in rows]
    spread = (max(per_step) - min(per_step)) / min(per_step)
    verdict = "flat" if spread <= 0.25 and max(per_step) <= TARGET_BYTES_PER_STEP else "NOT flat"
    print(
        f"spread {spread:.1%} from {counts[0]} to {counts[-1]} steps; "
        f"max {max(per_step):,.0f} B/step (target <= {TARGET_BYTES_PER_STEP}): {verdict}"
    )


if __name__ == "__main__":
    main()
