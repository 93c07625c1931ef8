"""`make bench`: us, raw Temporal and the peers, side by side on one machine and one dev
server. Each system runs in its own process (its own peak RSS) and reports JSON; this
prints the table, writes bench/results/ and the chart in docs/.

Usage: python -m bench.side_by_side [--steps 100] [--concurrent 20] [--only raw,ours]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import signal
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import Services, bench_services
from bench.report import RESULTS_DIR, write_chart, write_results
from bench.systems.common import RESULT_MARK, SCALE_ARGUMENTS, add_scale_arguments


@dataclass(frozen=True)
class System:
    name: str
    module: str
    needs: str | None  # a package of the `bench` extra, when it is a peer
    extra_args: tuple[str, ...] = ()


SYSTEMS = (
    System("raw Temporal", "bench.systems.raw", None),
    System(
        "durable-agents",
        "bench.systems.ours",
        None,
        ("--size-steps", "10,50,100,200,500,2000"),
    ),
    System("pydantic-ai (Temporal)", "bench.systems.pydantic_ai_peer", "pydantic_ai"),
    System("OpenAI Agents (Temporal)", "bench.systems.openai_agents_peer", "agents"),
    System(
        "Agent Harness (Temporal)",
        "bench.systems.harness_peer",
        "temporal_agent_harness",
        ("--size-steps", "10,100,200,500"),
    ),
    System("LangGraph + SqliteSaver", "bench.systems.langgraph_peer", "langgraph"),
)


def scale_arguments(args: argparse.Namespace) -> list[str]:
    """The orchestrator's knobs, passed on to a system's process as they were given."""
    passed = []
    for flag, *_ in SCALE_ARGUMENTS:
        passed += [flag, str(getattr(args, flag.removeprefix("--").replace("-", "_")))]
    return passed


async def run_system(
    system: System, services: Services, args: argparse.Namespace
) -> dict[str, Any]:
    if system.needs and importlib.util.find_spec(system.needs) is None:
        return {"system": system.name, "error": "not installed: `make bench` installs it"}
    command = [
        sys.executable,
        "-m",
        system.module,
        "--address",
        services.address,
        "--model-url",
        services.model_url,
        "--server-pid",
        str(services.server_pid),
        *scale_arguments(args),
        *(("--size-steps", args.size_steps) if args.size_steps else system.extra_args),
    ]
    env = {**os.environ, "BENCH_MODEL_URL": services.model_url}
    print(f"{system.name}:", flush=True)
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env
    )
    assert process.stdout is not None
    figures: dict[str, Any] | None = None
    tail: list[str] = []
    try:
        async for raw in process.stdout:
            line = raw.decode(errors="replace").rstrip()
            if line.startswith(RESULT_MARK):
                figures = json.loads(line.removeprefix(RESULT_MARK))
            elif line.startswith("  ["):
                print(line, flush=True)
            else:
                tail = [*tail[-20:], line]
        code = await process.wait()
    finally:
        if process.returncode is None:  # interrupted: the system goes with us
            process.kill()
            await process.wait()
    if figures is None:
        print("\n".join(tail), file=sys.stderr)
        return {"system": system.name, "error": f"exited {code} without figures (see above)"}
    return {**figures, "system": system.name}


async def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    chosen = [s for s in SYSTEMS if not args.only or any(o in s.module for o in args.only)]
    async with bench_services() as services:
        return [await run_system(system, services, args) for system in chosen]


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="side_by_side.py", description=__doc__)
    add_scale_arguments(parser)
    parser.add_argument("--size-steps", help="run lengths for bytes/step (default 10,50,100,200)")
    parser.add_argument("--only", type=lambda s: s.split(","), default=[], help="e.g. raw,ours")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    return parser


def main() -> None:
    args = arguments().parse_args()
    # Stopped by SIGTERM (a timeout, a CI runner): unwind like Ctrl-C, so the dev server,
    # the offline model and the system running are stopped, not left behind.
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
    try:
        rows = asyncio.run(measure(args))
    except KeyboardInterrupt:
        sys.exit("interrupted: the dev server, the offline model and the system were stopped")
    meta = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": (
            f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        ),
        "steps": args.steps,
        "concurrent": args.concurrent,
        "rebuild_steps": args.rebuild_steps,
    }
    table = write_results(rows, meta, args.results)
    print(table)
    chart = write_chart(rows, args.results)
    print(f"results in {args.results}/ (table, JSON{', chart' if chart else ''})")


if __name__ == "__main__":
    main()
