"""Recall over a large namespace: how long the `recall` tool's search takes with 100,000
memories in one namespace (and 10,000 in another beside it), on SQLite (the local
stack) and PostgreSQL, plain and sealed (encryption keys set: the blind index).

    python -m bench.memory_recall [--memories 100000] [--queries 50] [--no-postgres]

Prints the median and p95 of the queries and writes bench/results/memory-recall.txt.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bench.report import RESULTS_DIR
from durable_agents.activities.memory import MemoryStore
from durable_agents.activities.sql import PostgresDatabase, SqlDatabase, SqliteDatabase
from durable_agents.runtime.encryption import Keyring, new_key

TARGET_MS = 50.0
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
WORDS = [f"w{i}" for i in range(5000)] + [
    "email", "phone", "tea", "coffee", "refund", "parcel", "late", "lyon", "paris", "vip",
]  # fmt: skip


def texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(count)]


def measure(db: SqlDatabase, keyring: Keyring | None, count: int, queries: int) -> list[float]:
    store = MemoryStore(db, keyring)
    namespace = f"customer/{uuid.uuid4().hex[:8]}"
    batch = 5000
    for at in range(0, count, batch):
        store.remember_many(namespace, texts(min(batch, count - at), at), run_id="bench")
    store.remember_many(f"{namespace}-other", texts(10_000, 999_999), run_id="bench")
    rng = random.Random(7)
    took = []
    for _ in range(queries):
        query = " ".join(rng.choice(WORDS) for _ in range(3))
        started = time.perf_counter()
        store.recall(namespace, query, limit=5, max_bytes=4000)
        took.append((time.perf_counter() - started) * 1000)
    return took


def line(name: str, took: list[float], count: int) -> str:
    median = statistics.median(took)
    p95 = sorted(took)[int(len(took) * 0.95) - 1]
    verdict = "met" if median <= TARGET_MS else "not met"
    return (
        f"- {name}: median {median:.1f} ms, p95 {p95:.1f} ms over {len(took)} recalls "
        f"of {count:,} memories ({verdict})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    lines = [f"Recall (limit 5, 4,000 bytes), target: median <= {TARGET_MS:.0f} ms.", ""]
    keys = Keyring.parse(f"k1={new_key()}")
    with tempfile.TemporaryDirectory() as folder:
        for sealed in (None, keys):
            db: SqlDatabase = SqliteDatabase(Path(folder) / f"memory-{bool(sealed)}.sqlite3")
            took = measure(db, sealed, args.memories, args.queries)
            lines.append(
                line(f"SQLite FTS5, {'sealed' if sealed else 'plain'}", took, args.memories)
            )
            print(lines[-1], flush=True)
    if not args.no_postgres:
        for sealed in (None, keys):
            schema = f"bench_{uuid.uuid4().hex[:8]}"
            db = PostgresDatabase(POSTGRES_URL, schema)
            try:
                took = measure(db, sealed, args.memories, args.queries)
                name = f"PostgreSQL full text, {'sealed' if sealed else 'plain'}"
                lines.append(line(name, took, args.memories))
                print(lines[-1], flush=True)
            finally:
                import psycopg

                with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "memory-recall.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
