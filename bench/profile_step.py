"""Where a step's worker time goes: our worker sampled with py-spy while it runs the side
by side benchmark's steps, at 1 run and at 20 runs at once, and the samples broken down.

    python -m bench.profile_step [--system ours|raw] [--runs 200x1,100x20] [--rate 250]

py-spy is not one of our dependencies (it is a profiler, not a library): `pip install
py-spy` into the venv first; without it this says so and stops. Each sample is put in
the first bucket (BUCKETS, in order) whose pattern its stack holds, so the shares add up
to the worker's busy time; the innermost frames of the hottest stacks follow. Prints the
breakdown and writes bench/results/profile-<system>.txt.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from collections import Counter
from datetime import datetime
from pathlib import Path

from bench.harness import bench_services
from bench.report import RESULTS_DIR
from bench.systems.common import cost_runs

# (bucket, a pattern one of the stack's frames holds): the first that matches takes it.
BUCKETS: tuple[tuple[str, str], ...] = (
    ("workflow sandbox: importing, restricting", "workflow_sandbox/"),
    ("store: SQLite", "sqlite3"),
    ("store: our store code", "durable_agents/activities/"),
    ("model client: openai, httpx", "openai/"),
    ("workflow: our code", "durable_agents/workflows/"),
    ("payloads: converter, pydantic", "temporalio/converter"),
    ("workflow: Temporal's instance", "temporalio/worker/_workflow"),
    ("activity: Temporal's worker", "temporalio/worker/_activity"),
    ("worker: the bridge and its polls", "temporalio/"),
    ("bench: its client", "bench/"),
    ("asyncio's loop", "asyncio/"),
)


def bucket_of(frames: list[str]) -> str:
    for name, pattern in BUCKETS:
        if any(pattern in frame for frame in frames):
            return name
    return "other"


def breakdown(collapsed: Path, top: int) -> list[str]:
    """The shares of the samples in a py-spy raw (collapsed) file, by bucket; then the
    innermost frames most often on top."""
    buckets: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        buckets[bucket_of(frames)] += count
        leaves[frames[-1]] += count
    if total == 0:
        return ["no samples: did the run do any work?"]
    lines = [f"{total:,} samples of the busy worker"]
    lines += [f"  {share / total:6.1%}  {name}" for name, share in buckets.most_common()]
    lines.append("  innermost frames:")
    lines += [f"  {share / total:6.1%}  {frame}" for frame, share in leaves.most_common(top)]
    return lines


async def profiled(system: str, runs: str, rate: int, spy: str) -> list[str]:
    """The system's cost phase for `runs` under py-spy, against a fresh dev server and
    offline model."""
    async with bench_services() as services:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "profile.txt"
            kept = RESULTS_DIR / f"profile-{system}-{runs}.collapsed"
            command = [
                *(spy, "record", "--gil", "--format", "raw", "--rate", str(rate), "-o", str(out)),
                *("--", sys.executable, "-m", f"bench.systems.{system}"),
                *("--address", services.address, "--model-url", services.model_url),
                *("--phases", "cost", "--cost-runs", runs),
            ]
            done = await asyncio.create_subprocess_exec(*command)
            if await done.wait() != 0:
                raise SystemExit(f"error: py-spy or the {system} system failed ({done.returncode})")
            shutil.copyfile(out, kept)  # for a flame graph, or another breakdown
            return breakdown(out, top=25)


def main() -> None:
    parser = argparse.ArgumentParser(prog="profile_step.py", description=__doc__)
    parser.add_argument("--system", choices=("ours", "raw"), default="ours")
    parser.add_argument("--runs", type=str, default="200x1,100x20")
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise SystemExit("error: py-spy is not installed: pip install py-spy")
    lines = [f"# Where a step's worker time goes: {args.system} ({datetime.now():%Y-%m-%d %H:%M})"]
    for runs in args.runs.split(","):
        cost_runs(runs)  # a clear error for a malformed STEPSxRUNS
        lines += [
            "",
            f"## {runs} (steps x runs at once)",
            *asyncio.run(profiled(args.system, runs, args.rate, spy)),
        ]
        print("\n".join(lines), flush=True)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"profile-{args.system}.txt").write_text("\n".join([*lines, ""]))


if __name__ == "__main__":
    main()
