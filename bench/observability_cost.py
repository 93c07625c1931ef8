"""What encryption and tracing cost per agent step: steps per second and history bytes per
step on the `long` scenario, plain, with payload and store encryption, and with tracing
on top (spans kept in memory, so no exporter's network time is counted).

Usage: python -m bench.observability_cost [--steps 200] [--concurrent 10]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from bench.harness import Services, bench_services, bench_settings, history_bytes
from durable_agents.control import runs
from durable_agents.runtime.client import connect
from durable_agents.runtime.encryption import new_key
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest

MODES = ("plain", "encrypted", "encrypted+traced")


async def measure_mode(
    services: Services, mode: str, steps: int, concurrent: int
) -> dict[str, float | str]:
    with tempfile.TemporaryDirectory() as data_dir:
        settings = bench_settings(
            services.address, services.model_port, Path(data_dir), task_queue=f"cost-{mode}"
        )
        if mode != "plain":
            settings = settings.model_copy(update={"encryption_keys": SecretStr(f"k1={new_key()}")})
        client = await connect(settings)
        async with build_worker(client, settings):

            async def one(i: int, n: int) -> str:
                request = RunRequest.model_validate(
                    {
                        "goal": f"cost {mode} {i}",
                        "scenario": f"long?steps={n}&reply_bytes=1024",
                        "limits": {"context": "step"},
                    }
                )
                run = await runs.start_run(client, settings, request)
                outcome = await runs.wait_for_outcome(client, run.run_id)
                if outcome["status"] != "completed":
                    raise SystemExit(f"{mode}: run ended {outcome}")
                return run.run_id

            started = time.perf_counter()
            single = await one(0, steps)
            one_rate = steps / (time.perf_counter() - started)
            each = max(1, steps // concurrent)
            started = time.perf_counter()
            await asyncio.gather(*(one(i + 1, each) for i in range(concurrent)))
            many_rate = each * concurrent / (time.perf_counter() - started)
            size, _, _ = await history_bytes(client, single)
    return {
        "mode": mode,
        "one_run_steps_per_second": one_rate,
        "concurrent_steps_per_second": many_rate,
        "bytes_per_step": size / steps,
    }


async def measure(steps: int, concurrent: int) -> list[dict[str, float | str]]:
    rows = []
    async with bench_services() as services:
        for mode in MODES:
            if mode.endswith("+traced"):
                provider = TracerProvider()
                provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
                trace.set_tracer_provider(provider)
            rows.append(await measure_mode(services, mode, steps, concurrent))
            print(f"  {mode} done", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=10)
    args = parser.parse_args()
    print(
        f"cost of encryption and tracing: 1 run of {args.steps} steps, then {args.concurrent} "
        f"concurrent runs of {args.steps // args.concurrent} steps; 1 KB replies"
    )
    rows = asyncio.run(measure(args.steps, args.concurrent))
    print(f"{'mode':<18} {'steps/s (1 run)':>16} {'steps/s (many)':>15} {'bytes/step':>11}")
    for r in rows:
        print(
            f"{r['mode']:<18} {r['one_run_steps_per_second']:>16.1f} "
            f"{r['concurrent_steps_per_second']:>15.1f} {r['bytes_per_step']:>11,.0f}"
        )


if __name__ == "__main__":
    main()
