"""Live replies: the deltas a streaming model call publishes, outside the Temporal history.

One log per run (its workflow id), offset-addressed: a reader asks for what came after
the offset it has and never misses or repeats an entry. Each model call's attempt writes
a segment: `open`, its `delta`s, then `done`; an attempt that died (a killed worker, a
timeout) is marked `abandoned` when the next attempt opens its own, and a write from the
old attempt after that is refused. So a reader drops an abandoned segment's text and
never shows two replies glued together. The history keeps only the final reply, as for
any model call (invariant 3).

On the stores' own database: SQLite for a local stack (readers poll it), PostgreSQL when
the stores are there, with NOTIFY on each write so a console on another machine hears a
delta as it lands. Texts are sealed like every other store's rows (encrypted at rest when
keys are set, bound to their row).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from durable_agents.activities.fingerprints import now_text
from durable_agents.activities.sql import (
    Row,
    Sealed,
    SqlDatabase,
    StoreSchema,
    Tx,
    apply_schema,
    store_call,
)
from durable_agents.runtime.encryption import Keyring

# The tables, as this release's migrations (activities/sql.py: StoreSchema).
SCHEMA = StoreSchema(
    "live_log",
    (
        """
CREATE TABLE IF NOT EXISTS stream_log (
    run_id TEXT NOT NULL,
    pos INTEGER NOT NULL,
    segment TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (run_id, pos)
);
CREATE INDEX IF NOT EXISTS stream_log_segment ON stream_log (run_id, segment, kind)
""",
    ),
)
# The channel PostgreSQL notifies on (the payload: the run's workflow id).
CHANNEL = "agent_stream"
# A reader's page: a reply streams in far fewer entries (writes coalesce while one is made).
PAGE = 500
# The pieces of a finished reply are kept this long (a reader catching up gets them); the
# history and the transcript keep the reply itself. Its segment's open and close stay, so
# positions keep rising in a conversation that lasts weeks.
KEEP_PIECES = timedelta(hours=1)

EntryKind = Literal["open", "delta", "done", "abandoned"]
CLOSING: tuple[EntryKind, ...] = ("done", "abandoned")


class SegmentClosed(Exception):
    """A write for a segment already done or abandoned: an old attempt that lived on."""


@dataclass(frozen=True)
class StreamEntry:
    pos: int
    segment: str
    seq: int
    kind: EntryKind
    text: str

    def as_event(self) -> dict[str, Any]:
        """The entry as the event protocol carries it (docs/events.md, `delta`/`segment`)."""
        if self.kind == "delta":
            return {"segment": self.segment, "seq": self.seq, "text": self.text}
        return {"segment": self.segment, "seq": self.seq, "status": self.kind}


class DeltaStore:
    def __init__(
        self, db: SqlDatabase, keyring: Keyring | None = None, *, create: bool = True
    ) -> None:
        """`create`: make the table if it is not there (the worker). A reader (a console
        opens one per stream) makes none: until a worker has, it reads an empty log."""
        self.db = db
        self.sealed = Sealed(keyring)
        if create:
            apply_schema(db, SCHEMA)

    # -- writing (the model activity) ------------------------------------------------------

    def open_segment(self, run_id: str, seq: int, attempt: int) -> str:
        """A new attempt's segment; the run's segments still open are abandoned first."""
        segment = f"{seq}.{attempt}.{uuid.uuid4().hex[:8]}"
        with self.db.transaction() as tx:
            self._lock(tx, run_id)
            for stale in _open_segments(tx.execute, run_id):
                self._add(tx, run_id, stale["segment"], stale["seq"], "abandoned", "")
            self._add(tx, run_id, segment, seq, "open", "")
            _forget_old_pieces(tx, run_id)
        return segment

    def append(self, run_id: str, segment: str, seq: int, text: str) -> None:
        with self.db.transaction() as tx:
            self._lock(tx, run_id)
            if _is_closed(tx, run_id, segment):
                raise SegmentClosed(f"segment {segment} of {run_id} is closed")
            self._add(tx, run_id, segment, seq, "delta", text)

    def close(self, run_id: str, segment: str, seq: int, kind: EntryKind) -> None:
        with self.db.transaction() as tx:
            self._lock(tx, run_id)
            if not _is_closed(tx, run_id, segment):
                self._add(tx, run_id, segment, seq, kind, "")

    def _lock(self, tx: Tx, run_id: str) -> None:
        """One writer of a run's log at a time (an old attempt may still write): SQLite's
        transactions are serial already; PostgreSQL's take the run's advisory lock."""
        if not self.db.local:
            tx.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (run_id,))

    def _add(self, tx: Tx, run_id: str, segment: str, seq: int, kind: str, text: str) -> None:
        [row] = tx.execute(
            "SELECT COALESCE(MAX(pos), 0) + 1 AS pos FROM stream_log WHERE run_id = ?", (run_id,)
        )
        pos = int(row["pos"])
        body = self.sealed.dump(text, f"stream_log:{run_id}:{pos}")
        tx.execute(
            "INSERT INTO stream_log (run_id, pos, segment, seq, kind, body, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (run_id, pos, segment, seq, kind, body, now_text()),
        )
        if not self.db.local:
            # Delivered when the transaction commits, to every listener of the channel.
            tx.execute("SELECT pg_notify(?, ?)", (CHANNEL, run_id))

    # -- reading (console, CLI) ------------------------------------------------------------

    def read(self, run_id: str, after: int = 0, limit: int = PAGE) -> list[StreamEntry]:
        rows = self._query(
            "SELECT pos, segment, seq, kind, body FROM stream_log "
            "WHERE run_id = ? AND pos > ? ORDER BY pos LIMIT ?",
            (run_id, after, limit),
        )
        return [
            StreamEntry(
                pos=int(r["pos"]),
                segment=r["segment"],
                seq=int(r["seq"]),
                kind=r["kind"],
                text=self.sealed.load(r["body"], f"stream_log:{run_id}:{r['pos']}"),
            )
            for r in rows
        ]

    def finished(self, run_id: str, seq: int) -> bool:
        """Whether a segment of this reply ended `done`: readers have it whole."""
        return bool(
            self.db.query(
                "SELECT 1 FROM stream_log WHERE run_id = ? AND seq = ? AND kind = 'done' LIMIT 1",
                (run_id, seq),
            )
        )

    def start_point(self, run_id: str) -> int:
        """Where a new reader starts: just before the reply streaming now (so it sees that
        reply whole), else after everything (the replies before are in the thread)."""
        opened = _open_segments(self._query, run_id)
        if opened:
            [row] = self._query(
                "SELECT MIN(pos) AS pos FROM stream_log WHERE run_id = ? AND segment = ?",
                (run_id, opened[0]["segment"]),
            )
            return int(row["pos"]) - 1
        rows = self._query(
            "SELECT COALESCE(MAX(pos), 0) AS pos FROM stream_log WHERE run_id = ?", (run_id,)
        )
        return int(rows[0]["pos"]) if rows else 0

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """A read; no table yet (no worker has written to this database) reads as empty."""
        try:
            return self.db.query(sql, params)
        except Exception as err:
            if "stream_log" in str(err) and ("no such table" in str(err) or "exist" in str(err)):
                return []
            raise

    def forget(self, run_id: str) -> int:
        """Remove a run's log (pruning); how many entries went."""
        with self.db.transaction() as tx:
            [row] = tx.execute("SELECT COUNT(*) AS n FROM stream_log WHERE run_id = ?", (run_id,))
            tx.execute("DELETE FROM stream_log WHERE run_id = ?", (run_id,))
        return int(row["n"])


def _open_segments(
    run: Callable[[str, Sequence[Any]], list[Row]], run_id: str
) -> list[dict[str, Any]]:
    """The run's segments opened and not closed (`run`: a transaction's or the database's
    way to run a statement)."""
    return run(
        "SELECT segment, seq FROM stream_log o WHERE run_id = ? AND kind = 'open' AND NOT EXISTS "
        "(SELECT 1 FROM stream_log c WHERE c.run_id = o.run_id AND c.segment = o.segment "
        "AND c.kind IN ('done', 'abandoned'))",
        (run_id,),
    )


def _forget_old_pieces(tx: Tx, run_id: str) -> None:
    before = (datetime.now(UTC) - KEEP_PIECES).isoformat()
    tx.execute(
        "DELETE FROM stream_log WHERE run_id = ? AND kind = 'delta' AND created_at < ?",
        (run_id, before),
    )


def _is_closed(tx: Tx, run_id: str, segment: str) -> bool:
    return bool(
        tx.execute(
            "SELECT 1 FROM stream_log WHERE run_id = ? AND segment = ? "
            "AND kind IN ('done', 'abandoned') LIMIT 1",
            (run_id, segment),
        )
    )


class LiveReply:
    """What a streaming model client writes its text deltas to (`sink(text)`, never
    blocking): writes coalesce while one is being made, so a fast model costs a write per
    batch of tokens, and the first token is written at once."""

    def __init__(self, store: DeltaStore, run_id: str, seq: int, attempt: int) -> None:
        self.store, self.run_id, self.seq, self.attempt = store, run_id, seq, attempt
        self.segment = ""
        self._pending: list[str] = []
        self._writing: asyncio.Future[None] | None = None
        self.superseded = False

    async def __aenter__(self) -> Callable[[str], None]:
        self.segment = await store_call(
            self.store.db, self.store.open_segment, self.run_id, self.seq, self.attempt
        )
        return self.sink

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if self._writing is not None:
            await asyncio.gather(self._writing, return_exceptions=True)
        if not self.superseded:
            closing: EntryKind = "done" if kind is None else "abandoned"
            await store_call(
                self.store.db, self.store.close, self.run_id, self.segment, self.seq, closing
            )

    def sink(self, text: str) -> None:
        if not text or self.superseded:
            return
        self._pending.append(text)
        if self._writing is None or self._writing.done():
            self._writing = asyncio.ensure_future(self._write())

    async def _write(self) -> None:
        while self._pending and not self.superseded:
            text = "".join(self._pending)
            self._pending.clear()
            try:
                await store_call(
                    self.store.db, self.store.append, self.run_id, self.segment, self.seq, text
                )
            except SegmentClosed:
                # A newer attempt took over: this one's text is no reply anyone shows.
                self.superseded = True
