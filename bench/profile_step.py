"""Where a step's worker time goes: our worker sampled with py-spy while it runs the side
by side benchmark's steps, at 1 run and at 20 runs at once, and the samples broken down.

    python -m bench.profile_step [--system ours|raw] [--runs 200x1,100x20] [--rate 250]

py-spy is not one of our dependencies (it is a profiler, not a library): `pip install
py-spy` into the venv first; without it this says so and stops. Each sample is put in
its owner (OWNERS: the innermost frame a pattern matches), as ms a step, so the shares
add up to the worker's busy time; the innermost frames of the hottest stacks follow. Prints the
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
from bench.systems.common import cost_runs, positive

# Who a sample's time belongs to: the innermost frame of its stack that one of these
# patterns matches (in order), so each sample counts once and the shares add up.
OWNERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("SDK's sandbox hop per payload", ("workflow_sandbox",)),
    ("SDK's payload visitor", ("bridge/_visitor", "_command_aware_visitor")),
    ("SQLite", ("sqlite3", "activities/sql.py")),
    ("openai client + httpx (the model call)", ("openai/", "httpx", "httpcore", "h11")),
    ("pydantic", ("pydantic",)),
    ("json", ("json/",)),
    ("our workflow code", ("durable_agents/workflows",)),
    ("our activity and worker code", ("durable_agents/",)),
    ("SDK's converter", ("temporalio/converter", "temporalio/contrib")),
    ("Temporal SDK, other", ("temporalio/",)),
    ("asyncio loop", ("asyncio", "selectors")),
)
IMPORTING = "_find_and_load"  # the process's own imports: not a step's


def owner_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, patterns in OWNERS:
            if any(pattern in frame for pattern in patterns):
                return name
    return "other"


def breakdown(collapsed: Path, steps: int, rate: int, top: int) -> list[str]:
    """The busy samples of a py-spy raw (collapsed) file as ms a step, by owner; then the
    innermost frames most often on top."""
    owners: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    for line in collapsed.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit() or IMPORTING in stack:
            continue
        frames = stack.split(";")
        owners[owner_of(frames)] += int(count_text)
        leaves[frames[-1]] += int(count_text)
    total = owners.total()
    if total == 0:
        return ["no samples: did the run do any work?"]
    per_step = 1000 / rate / steps  # ms a step per sample
    lines = [f"{total:,} busy samples, {total * per_step:.2f} ms a step (GIL held)"]
    lines += [f"  {n * per_step:6.2f} ms  {name}" for name, n in owners.most_common()]
    lines.append("  innermost frames:")
    lines += [f"  {n * per_step:6.2f} ms  {frame}" for frame, n in leaves.most_common(top)]
    return lines


async def profiled(system: str, runs: str, rate: int, spy: str, results: Path) -> list[str]:
    """The system's cost phase for `runs` under py-spy, against a fresh dev server and
    offline model."""
    async with bench_services() as services:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "profile.txt"
            kept = results / f"profile-{system}-{runs}.collapsed"
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
            steps = sum(n * count for n, count in cost_runs(runs))
            return breakdown(out, steps, rate, top=25)


def main() -> None:
    parser = argparse.ArgumentParser(prog="profile_step.py", description=__doc__)
    parser.add_argument("--system", choices=("ours", "raw"), default="ours")
    parser.add_argument("--runs", type=str, default="200x1,100x20")
    parser.add_argument("--rate", type=positive, default=250, help="samples per second")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    for runs in args.runs.split(","):
        try:
            cost_runs(runs)
        except argparse.ArgumentTypeError as err:
            parser.error(str(err).replace("--cost-runs", "--runs"))
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise SystemExit("error: py-spy is not installed: pip install py-spy")
    lines = [f"# Where a step's worker time goes: {args.system} ({datetime.now():%Y-%m-%d %H:%M})"]
    args.results.mkdir(parents=True, exist_ok=True)
    for runs in args.runs.split(","):
        lines += [
            "",
            f"## {runs} (steps x runs at once)",
            *asyncio.run(profiled(args.system, runs, args.rate, spy, args.results)),
        ]
        print("\n".join(lines), flush=True)
    (args.results / f"profile-{args.system}.txt").write_text("\n".join([*lines, ""]))


if __name__ == "__main__":
    main()
