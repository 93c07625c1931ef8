"""What a what-if costs: recorded pay-invoice runs played again against the same agent
(every model answer from the memo) and against changed instructions (every model call
live), beside what the recorded runs took: wall time per run, model requests that reached
the endpoint, tokens; and the effects the providers recorded meanwhile (none).

    python -m bench.whatif_cost [--runs 50]

On the local stack: a dev server, the offline model in its own process, our worker and the
what-if's worker in this process, our stores on SQLite. Prints the figures and writes
bench/results/whatif.txt.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path

from bench.harness import bench_services, bench_settings
from bench.report import RESULTS_DIR
from durable_agents.client import AgentClient
from durable_agents.control import runs, whatif, whatif_record
from durable_agents.control.whatif_record import RecordedRun
from durable_agents.examples.invoice import invoice_agent
from durable_agents.examples.providers import Providers
from durable_agents.whatif import Variant, WhatIfReport
from durable_agents.worker.main import build_worker
from durable_agents.worker.shadow import build_shadow_worker
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision

STRICT = invoice_agent.instructions + " Never pay an invoice above 1,000 EUR: leave it unpaid."


def model_requests(model_url: str) -> int:
    with urllib.request.urlopen(f"{model_url}/scripted/stats", timeout=10) as answer:
        return int(json.load(answer)["totals"].get("requests", 0))


async def recorded_runs(client: AgentClient, count: int) -> list[str]:
    ids = [f"bench-inv-{uuid.uuid4().hex[:8]}" for _ in range(count)]
    request = RunRequest(goal="Pay invoice INV-1001", agent="invoice", label="pay-invoice")

    async def one(rid: str) -> None:
        await runs.start_run(client.temporal, client.settings, request, rid)
        handle = client.run(rid)
        approval = await handle.next_approval(within=300)
        decision = Decision(request_id=approval.request_id, by="alice")
        await runs.approve(client.temporal, rid, decision)
        await handle.result()

    await asyncio.gather(*(one(rid) for rid in ids))
    return ids


async def timed(
    client: AgentClient, recorded: list[RecordedRun], variant: Variant, model_url: str
) -> tuple[WhatIfReport, float, int]:
    """The shadows alone (the records read once, before): wall time, model requests."""
    before = model_requests(model_url)
    started = time.perf_counter()
    report = await whatif.what_if(
        client.temporal, client.settings, recorded, variant, build_shadow_worker
    )
    return report, time.perf_counter() - started, model_requests(model_url) - before


def charges(data_dir: Path) -> int:
    providers = Providers.open(data_dir)
    return len(providers.payments.effects()) + len(providers.email.effects())


async def measure(count: int) -> str:
    async with bench_services() as services:
        with tempfile.TemporaryDirectory() as data_dir:
            settings = bench_settings(services.address, services.model_port, Path(data_dir))
            client = AgentClient(services.env.client, settings)
            async with build_worker(services.env.client, settings):
                requests_before = model_requests(services.model_url)
                started = time.perf_counter()
                ids = await recorded_runs(client, count)
                recorded_seconds = time.perf_counter() - started
                recorded_requests = model_requests(services.model_url) - requests_before
                effects = charges(Path(data_dir))
                started = time.perf_counter()
                recorded = await whatif_record.recorded_runs(
                    services.env.client, settings, run_ids=ids
                )
                reading_seconds = time.perf_counter() - started
                same, same_seconds, same_requests = await timed(
                    client, recorded, Variant(), services.model_url
                )
                strict, strict_seconds, strict_requests = await timed(
                    client, recorded, Variant(instructions=STRICT), services.model_url
                )
                effects_after = charges(Path(data_dir))
    rows = [
        ("recorded (a person approves each)", recorded_seconds, recorded_requests, None),
        ("reading the records (histories replayed, stores read)", reading_seconds, 0, None),
        ("what-if, the same agent", same_seconds, same_requests, same),
        ("what-if, stricter instructions", strict_seconds, strict_requests, strict),
    ]
    lines = [
        f"# What a what-if costs ({datetime.now().isoformat(timespec='seconds')})",
        "",
        f"{count} recorded pay-invoice runs (plan, 4 steps, 10 model calls, 4 tools, one "
        "approval each), all started at once; the what-ifs play 4 shadows at a time.",
        "",
        "| | wall time | per run | model requests | tokens | differences |",
        "|---|---|---|---|---|---|",
    ]
    for name, seconds, requests, report in rows:
        tokens = "" if report is None else f"{report.totals.tokens_now:,}"
        differ = "" if report is None else f"{report.totals.runs_with_differences} runs"
        lines.append(
            f"| {name} | {seconds:.1f} s | {seconds / count * 1000:.0f} ms | {requests:,} | "
            f"{tokens} | {differ} |"
        )
    lines += [
        "",
        f"Tokens of the recorded runs: {same.totals.tokens_then:,}. Effects the providers "
        f"recorded: {effects} by the recorded runs, {effects_after - effects} during both "
        "what-ifs.",
        f"Stricter instructions: {strict.totals.effects_removed} effects removed, "
        f"{strict.totals.effects_added} added.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    text = asyncio.run(measure(args.runs))
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "whatif.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
