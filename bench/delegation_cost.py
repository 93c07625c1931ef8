"""What a sub-agent costs in history: the triage example (a parent delegating to a research
agent that calls its MCP server twice) against the research agent run on its own.

    python -m bench.delegation_cost [--runs 5]

Prints, per run: the parent's and the child's events and bytes, the child's alone, and
the part of the difference that is the live spend roll-up (the child's `child_spent`
signals to its parent, one after each model or tool call).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.harness import bench_stack, history_bytes
from durable_agents.control import runs, timeline
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.contracts import RunRequest

REPORT_EVENTS = (
    EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
    EventType.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED,
)


async def one(client: Client, settings: Settings, agent: str) -> tuple[str, float]:
    rid = f"{agent}-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    await runs.start_run(
        client, settings, RunRequest(goal="Late parcel", agent=agent, label="triage"), rid
    )
    await runs.wait_result(client, rid)
    return rid, time.perf_counter() - started


async def report_events(client: Client, workflow_id: str) -> tuple[int, int]:
    """The roll-up's own events in a run's history, and their bytes."""
    history = await timeline.fetch_history(client, workflow_id)
    mine = [e for e in history.events if e.event_type in REPORT_EVENTS]
    return len(mine), sum(e.ByteSize() for e in mine)


async def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as kb:
        os.environ["KB_DIR"] = kb
        async with bench_stack() as bench:
            client, settings = bench.client, bench.settings
            rows = []
            for _ in range(count):
                parent, parent_s = await one(client, settings, "triage")
                child = (await runs.get_state(client, parent)).delegations[0].child_id
                alone, alone_s = await one(client, settings, "research")
                p_bytes, p_events, _ = await history_bytes(client, parent)
                c_bytes, c_events, _ = await history_bytes(client, child)
                a_bytes, a_events, _ = await history_bytes(client, alone)
                r_events, r_bytes = await report_events(client, child)
                rows.append(
                    (p_events, p_bytes, c_events, c_bytes, a_events, a_bytes, r_events, r_bytes,
                     parent_s, alone_s)
                )  # fmt: skip
    med = [statistics.median(column) for column in zip(*rows, strict=True)]
    print(f"runs: {count} (medians)")
    print(f"parent (triage: 2 model calls, 1 delegation): {med[0]:.0f} events, {med[1]:,.0f} B")
    print(f"child (research as a sub-agent):             {med[2]:.0f} events, {med[3]:,.0f} B")
    print(f"research run on its own:                     {med[4]:.0f} events, {med[5]:,.0f} B")
    print(
        f"the child's extra over running alone:        {med[2] - med[4]:+.0f} events, "
        f"{med[3] - med[5]:+,.0f} B; of which spend reports: {med[6]:.0f} events, "
        f"{med[7]:,.0f} B"
    )
    print(f"wall clock: the whole tree {med[8]:.2f} s; research alone {med[9]:.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    asyncio.run(main(parser.parse_args().runs))
