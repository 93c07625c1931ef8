"""What a conversation's turn takes on two replicas: each with a store of its own (SQLite
under its own data dir; the run's store-bound activities go to the queue of the replica
holding its store, activities/store_queue.py) beside both on one shared store
(PostgreSQL, every activity on the main queue).

    python -m bench.replicas [--turns 40] [--database-url postgresql://...]

On the local stack: a dev server, the offline model in its own process, two workers in
this process (a connection each, as two processes would have). Each turn is a message
sent and its reply awaited; half are plain (one model call), half look an order up (a
model call, a tool call, a model call for the reply). Prints, for each layout, the
per-turn time (median, p95, max) of each kind, how long a store-bound activity waited to
be handed to a worker, where those activities were scheduled, and how many calls a store
refused (StoreMissingRecords: none is the point); writes bench/results/replicas.txt.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.harness import bench_services, bench_settings
from bench.report import RESULTS_DIR
from durable_agents.activities.store_queue import STORE_QUEUE_SEPARATOR
from durable_agents.control import conversations
from durable_agents.control.timeline import fetch_chain
from durable_agents.runtime.settings import Settings
from durable_agents.worker.main import build_worker
from durable_agents.workflows.activity_io import STORE_MISSING
from durable_agents.workflows.activity_options import STORE_BOUND

WARM_UP = 2  # turns left out of the figures: the first call learns where the store is


@dataclass
class Layout:
    """What one layout's conversation measured."""

    name: str
    plain: list[float] = field(default_factory=list)
    looked_up: list[float] = field(default_factory=list)
    queues: Counter[str] = field(default_factory=Counter)
    refused: int = 0
    # Each store-bound activity's wait from scheduled to handed to a worker (seconds).
    pickup: list[float] = field(default_factory=list)


@contextlib.asynccontextmanager
async def replicas(client: Client, *settings: Settings) -> AsyncIterator[None]:
    """A worker per settings, each on a connection of its own."""
    target = client.service_client.config.target_host
    async with contextlib.AsyncExitStack() as stack:
        for each in settings:
            own = await Client.connect(
                target, namespace=client.namespace, data_converter=client.data_converter
            )
            await stack.enter_async_context(build_worker(own, each))
        yield


async def converse(client: Client, settings: Settings, layout: Layout, turns: int) -> None:
    """One conversation of `turns` turns (after the warm-up), each timed from the send to
    its reply."""
    cid = f"replicas-{uuid.uuid4().hex[:8]}"
    request = conversations.conversation_request("support-chat", label="chat")
    await conversations.open_conversation(client, settings, request, cid)
    for i in range(WARM_UP + turns):
        looks_up = i % 2 == 1
        text = f"Where is my order A-{1000 + i}?" if looks_up else f"Hello {i}"
        started = time.perf_counter()
        turn = await conversations.send(client, cid, conversations.message(text, by="bench"))
        took = time.perf_counter() - started
        if turn.status != "answered":
            raise RuntimeError(f"{layout.name}: turn {i} {turn.status}: {turn}")
        if i >= WARM_UP:
            (layout.looked_up if looks_up else layout.plain).append(took)
    await count_in_history(client, cid, layout)


async def count_in_history(client: Client, cid: str, layout: Layout) -> None:
    """Where each store-bound activity was scheduled, how long it waited for a worker, and
    the attempts a store refused."""
    for _, history in await fetch_chain(client, cid):
        scheduled_at: dict[int, float] = {}
        for event in history.events:
            at = event.event_time.ToDatetime().timestamp()
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                scheduled = event.activity_task_scheduled_event_attributes
                if scheduled.activity_type.name in STORE_BOUND:
                    main = STORE_QUEUE_SEPARATOR not in scheduled.task_queue.name
                    layout.queues["main queue" if main else "its store's queue"] += 1
                    scheduled_at[event.event_id] = at
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                started = event.activity_task_started_event_attributes
                if started.scheduled_event_id in scheduled_at:
                    layout.pickup.append(at - scheduled_at[started.scheduled_event_id])
                if started.last_failure.application_failure_info.type == STORE_MISSING:
                    layout.refused += 1


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def postgres_reachable(url: str) -> str | None:
    """Why the shared store cannot be measured here, or None."""
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3):
            return None
    except Exception as err:  # no driver, no server: said, and that layout left out
        return f"{type(err).__name__}: {err}"


def figures(name: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return f"  {name:<10} {len(ms):>5} {statistics.median(ms):>10.1f} {p95:>10.1f} {ms[-1]:>10.1f}"


def report(layouts: list[Layout], skipped: list[str]) -> str:
    lines = [
        f"Replicas: per-turn time of one conversation on two replicas, {datetime.now():%Y-%m-%d}",
        "(a turn: a message sent to its reply; plain: one model call; look-up: model, tool,",
        "model; pick-up: a store-bound activity scheduled to handed to a worker). ms.",
        "",
    ]
    for layout in layouts:
        placed = ", ".join(f"{n} on {q}" for q, n in sorted(layout.queues.items()))
        lines += [
            f"{layout.name}",
            f"  {'turn':<10} {'turns':>5} {'median':>10} {'p95':>10} {'max':>10}",
            figures("plain", layout.plain),
            figures("look-up", layout.looked_up),
            figures("pick-up", layout.pickup),
            f"  store-bound activities: {placed}; refused by a store: {layout.refused}",
            "",
        ]
    lines += [f"not measured: {why}" for why in skipped]
    return "\n".join(lines).rstrip() + "\n"


async def measure(args: argparse.Namespace) -> str:
    layouts, skipped = [], []
    async with bench_services() as services:
        client = services.env.client
        with tempfile.TemporaryDirectory() as data_dir:
            base = bench_settings(
                services.address, services.model_port, Path(data_dir), task_queue="bench-own"
            ).model_copy(update={"namespace_is_ours_alone": True})  # the bench's own server
            own = [base.model_copy(update={"data_dir": Path(data_dir) / n}) for n in "ab"]
            layout = Layout("two replicas, a store of their own each (SQLite)")
            async with replicas(client, *own):
                await converse(client, own[0], layout, args.turns)
            layouts.append(layout)
            print(f"  [{layout.name}] measured", flush=True)

            why = postgres_reachable(args.database_url)
            if why is not None:
                skipped.append(f"one shared store: no PostgreSQL at {args.database_url} ({why})")
            else:
                schema = f"bench_{uuid.uuid4().hex[:8]}"
                shared = [
                    s.model_copy(
                        update={
                            "task_queue": "bench-shared",
                            "database_url": args.database_url,
                            "database_schema": schema,
                        }
                    )
                    for s in own
                ]
                layout = Layout("two replicas, one shared store (PostgreSQL)")
                try:
                    async with replicas(client, *shared):
                        await converse(client, shared[0], layout, args.turns)
                finally:
                    drop_schema(args.database_url, schema)
                layouts.append(layout)
                print(f"  [{layout.name}] measured", flush=True)
    return report(layouts, skipped)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument(
        "--database-url", default="postgresql://postgres@127.0.0.1:5432/test", help="shared"
    )
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    text = asyncio.run(measure(args))
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "replicas.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
