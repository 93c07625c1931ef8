"""What a replay-gated release costs: `agentctl release check` against N open runs (each
waiting for an approval) and the closed sample, on the dev server and the offline model.

    python -m bench.release_check [--open 40] [--closed 20]

Prints the check's wall clock, the runs it replayed per second, and what a versioned
worker's start costs (a deployment's first build made current).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

from temporalio.client import Client

from bench.harness import bench_stack
from durable_agents.control import release, runs
from durable_agents.runtime import versioning
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision

PAY = RunRequest(goal="pay the invoice", agent="invoice", label="pay-invoice")


async def wait_for_approval(client: Client, rid: str) -> None:
    for _ in range(1200):
        if (await runs.get_summary(client, rid)).pending_approvals:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{rid} never asked for approval")


async def main(open_runs: int, closed_runs: int) -> None:
    async with bench_stack() as bench:
        client, settings = bench.client, bench.settings
        rids = [f"check-{uuid.uuid4().hex[:8]}" for _ in range(open_runs + closed_runs)]
        for rid in rids:
            await runs.start_run(client, settings, PAY, rid)
        for rid in rids:
            await wait_for_approval(client, rid)
        for rid in rids[open_runs:]:
            await runs.approve(client, rid, Decision(by="bench"))
            await runs.wait_result(client, rid)
        await asyncio.sleep(2)  # visibility catches up
        timings = []
        for per_agent in (3, closed_runs):
            started = time.perf_counter()
            report = await release.check_runs(client, settings, per_agent=per_agent)
            timings.append((per_agent, len(report.runs), time.perf_counter() - started))
            assert report.ok, report.diverging
        other = settings.model_copy(update={"deployment": f"bench-{uuid.uuid4().hex[:8]}"})
        started = time.perf_counter()
        await versioning.ensure_current_build(client, other)
        first_build = time.perf_counter() - started
    print(f"open runs: {open_runs} waiting for approval; closed: {closed_runs} (one agent)")
    for per_agent, checked, seconds in timings:
        print(
            f"release check, {per_agent} closed per agent: {checked} runs replayed in "
            f"{seconds:.2f} s ({checked / seconds:.1f} runs/s)"
        )
    print(
        f"a deployment's first build made current (once, at a worker's start): {first_build:.2f} s"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--open", type=int, default=40)
    parser.add_argument("--closed", type=int, default=20)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.open, arguments.closed))
