"""What a conversation costs: the first token's delay beside the endpoint's own, history
bytes per turn over a long conversation (with streaming and without), and the worker's
memory per idle conversation beside a run waiting for an approval.

    python -m bench.conversation_cost [--turns 200] [--first-tokens 20] [--idle 200]

On the local stack: a dev server, the offline model in its own process (its `chat`
scenario streams each reply in pieces), our worker in this process, our stores on SQLite.
Prints the figures and writes bench/results/conversation.txt.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

import openai
from temporalio.client import Client

from bench.cpu import own_rss_bytes
from bench.harness import bench_services, bench_settings, history_bytes
from bench.report import RESULTS_DIR
from durable_agents.activities.stream import DeltaStore
from durable_agents.control import conversations, runs
from durable_agents.control.live import LiveReplies
from durable_agents.runtime.settings import Settings
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest

LABEL = "chat?reply_bytes=400"
FIRST_TOKEN_TARGET_MS = 50.0


async def open_chat(client: Client, settings: Settings, prefix: str) -> str:
    cid = f"{prefix}-{uuid.uuid4().hex[:8]}"
    request = conversations.conversation_request("support-chat", label=LABEL)
    await conversations.open_conversation(client, settings, request, cid)
    return cid


async def endpoint_first_token(model_url: str, samples: int) -> list[float]:
    """The endpoint's own: from the request to the first piece of text, through the same
    openai client the worker uses."""
    client = openai.AsyncOpenAI(base_url=model_url, api_key="bench", max_retries=0)
    delays = []
    for i in range(samples):
        started = time.perf_counter()
        chunks = await client.chat.completions.create(
            model="offline",
            messages=[{"role": "user", "content": f"hello {i}"}],
            stream=True,
            extra_headers={"X-Run-Label": LABEL},
        )
        async with chunks:
            async for chunk in chunks:
                if chunk.choices and chunk.choices[0].delta.content:
                    delays.append(time.perf_counter() - started)
                    break
    return delays


async def our_first_token(
    client: Client, settings: Settings, samples: int
) -> tuple[list[float], list[float]]:
    """Ours: from sending a message to the first piece, written to the live log (by the
    log's own clock) and seen by a reader polling it as the console does."""
    cid = await open_chat(client, settings, "first-token")
    reader = LiveReplies(settings)
    written, seen = [], []
    try:
        for i in range(samples):
            pos = await asyncio.to_thread(reader.store.start_point, cid)
            sent = conversations.message(f"hello {i}", by="bench")
            wall, started = time.time(), time.perf_counter()
            await conversations.post(client, cid, sent)
            first = None
            while first is None:
                entries = await reader.after(cid, pos, wait=10)
                first = next((e for e in entries if e.kind == "delta"), None)
                pos = entries[-1].pos if entries else pos
            seen.append(time.perf_counter() - started)
            written.append(_created_at(reader.store, cid, first.pos) - wall)
            await conversations.await_reply(client, cid, sent.message_id)
    finally:
        await reader.close()
    return written, seen


def _created_at(store: DeltaStore, run_id: str, pos: int) -> float:
    [row] = store.db.query(
        "SELECT created_at FROM stream_log WHERE run_id = ? AND pos = ?", (run_id, pos)
    )
    return datetime.fromisoformat(str(row["created_at"])).timestamp()


async def bytes_per_turn(client: Client, settings: Settings, turns: int) -> dict[str, float]:
    """History bytes each turn adds to its run, early and late, and over the whole chain."""
    cid = await open_chat(client, settings, "turns")
    added: list[int] = []
    last_run, last_size = "", 0
    for i in range(turns):
        await conversations.send(client, cid, conversations.message(f"turn {i}", by="bench"))
        described = await client.get_workflow_handle(cid).describe()
        size = described.raw_description.workflow_execution_info.history_size_bytes
        if described.run_id == last_run:
            added.append(size - last_size)
        last_run, last_size = described.run_id, size
    total, _, chain = await history_bytes(client, cid)
    tenth = max(1, len(added) // 10)
    return {
        "turns": turns,
        "first_tenth": statistics.median(added[:tenth]),
        "last_tenth": statistics.median(added[-tenth:]),
        "whole_chain": total / turns,
        "runs": chain,
    }


async def idle_memory(client: Client, settings: Settings, count: int) -> dict[str, float]:
    """Resident memory the worker grows by per idle conversation (one turn answered, then
    waiting for a message) and per run waiting for an approval, both cached."""

    async def conversation() -> str:
        cid = await open_chat(client, settings, "idle")
        await conversations.send(client, cid, conversations.message("hi", by="bench"))
        return cid

    async def waiting_run() -> str:
        rid = f"wait-{uuid.uuid4().hex[:8]}"
        request = RunRequest(goal="pay", agent="invoice", label="pay-invoice")
        await runs.start_run(client, settings, request, rid)
        return rid

    figures: dict[str, float] = {}
    started: list[str] = []
    for name, make in (("conversation", conversation), ("waiting_run", waiting_run)):
        started += [await make() for _ in range(10)]  # warm the code paths up
        before = own_rss_bytes()
        for at in range(0, count, 25):
            started += await asyncio.gather(*(make() for _ in range(min(25, count - at))))
        if name == "waiting_run":
            await _all_waiting(client, started[-count:])
        figures[f"{name}_kb"] = (own_rss_bytes() - before) / count / 1024
    for at in range(0, len(started), 50):
        await asyncio.gather(
            *(client.get_workflow_handle(i).terminate("bench") for i in started[at : at + 50])
        )
    return figures


async def _all_waiting(client: Client, ids: list[str]) -> None:
    """Every run has reached its approval (its state then is what stays cached)."""
    for rid in ids:
        for _ in range(1200):
            if (await runs.get_summary(client, rid)).waiting_for == "approval":
                break
            await asyncio.sleep(0.05)


def report(
    endpoint: list[float],
    written: list[float],
    seen: list[float],
    streamed: dict[str, float],
    whole: dict[str, float],
    memory: dict[str, float],
) -> str:
    ms = [statistics.median(x) * 1000 for x in (endpoint, written, seen)]
    over = ms[1] - ms[0]
    verdict = "met" if over <= FIRST_TOKEN_TARGET_MS else "not met"
    return "\n".join(
        [
            "Conversations on the local stack (dev server, offline model streaming, SQLite).",
            "",
            f"First token, median of {len(seen)} turns (target: <= {FIRST_TOKEN_TARGET_MS:.0f}"
            " ms over the endpoint's own):",
            f"- the endpoint's own (request to first piece, openai client): {ms[0]:.1f} ms",
            f"- ours, message sent to first piece in the live log: {ms[1]:.1f} ms "
            f"(+{over:.1f} ms over the endpoint: {verdict})",
            f"- ours, seen by a reader polling the log (the console on SQLite): {ms[2]:.1f} ms",
            "",
            f"History bytes per turn over {streamed['turns']:.0f} turns "
            f"({streamed['runs']:.0f} runs of the continue-as-new chain):",
            f"- streamed: first tenth {streamed['first_tenth']:,.0f} B, last tenth "
            f"{streamed['last_tenth']:,.0f} B, whole chain {streamed['whole_chain']:,.0f} B/turn",
            f"- not streamed (AGENT_STREAM_REPLIES=false), {whole['turns']:.0f} turns: first "
            f"tenth {whole['first_tenth']:,.0f} B, last tenth {whole['last_tenth']:,.0f} B, "
            f"whole chain {whole['whole_chain']:,.0f} B/turn",
            "",
            "Worker memory, cached, per:",
            f"- idle conversation (one turn answered): {memory['conversation_kb']:.0f} KB",
            f"- run waiting for an approval: {memory['waiting_run_kb']:.0f} KB",
            "",
        ]
    )


async def measure(args: argparse.Namespace) -> str:
    async with bench_services() as services:
        client = services.env.client
        with tempfile.TemporaryDirectory() as data_dir:
            settings = bench_settings(services.address, services.model_port, Path(data_dir))
            async with build_worker(client, settings):
                endpoint = await endpoint_first_token(services.model_url, args.first_tokens)
                written, seen = await our_first_token(client, settings, args.first_tokens)
                print(f"  [first token] {statistics.median(written) * 1000:.1f} ms", flush=True)
                streamed = await bytes_per_turn(client, settings, args.turns)
                print(f"  [history] {streamed}", flush=True)
                memory = await idle_memory(client, settings, args.idle)
                print(f"  [memory] {memory}", flush=True)
        with tempfile.TemporaryDirectory() as data_dir:
            plain = bench_settings(
                services.address, services.model_port, Path(data_dir), task_queue="bench-whole"
            ).model_copy(update={"stream_replies": False})
            async with build_worker(client, plain):
                whole = await bytes_per_turn(client, plain, args.turns)
    return report(endpoint, written, seen, streamed, whole, memory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--first-tokens", type=int, default=20)
    parser.add_argument("--idle", type=int, default=200)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    text = asyncio.run(measure(args))
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "conversation.txt").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
