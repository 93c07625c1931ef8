"""Following a run's live replies (activities/stream.py) from anywhere its stores reach:
the console's event stream and `agentctl chat`/`watch` read the log after their offset
and wait for more: woken by NOTIFY on PostgreSQL (a console on another machine hears a
token as it lands), a short poll on a local SQLite file."""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any

from durable_agents.activities.stores import open_database
from durable_agents.activities.stream import CHANNEL, DeltaStore, StreamEntry
from durable_agents.runtime.encryption import keyring_from
from durable_agents.runtime.settings import Settings

# How often a reader of a SQLite log looks for more (it has no NOTIFY).
POLL_SECONDS = 0.02


class LiveReplies:
    """One reader of the live log: `after(run_id, pos, wait)` answers the entries past
    `pos`, waiting up to `wait` seconds for the first one."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = DeltaStore(open_database(settings), keyring_from(settings), create=False)
        self._listener: Any = None
        self._pump: asyncio.Future[None] | None = None
        self._heard = asyncio.Event()
        self.notified = 0  # notifications heard (PostgreSQL): what woke this reader

    @classmethod
    def reachable(cls, settings: Settings) -> LiveReplies | None:
        """A reader when this machine reaches the stores (PostgreSQL, or the worker's own
        SQLite file); None otherwise: events then come without deltas."""
        if settings.database_url is None and not settings.database_path.exists():
            return None
        return cls(settings)

    async def after(self, run_id: str, pos: int, wait: float) -> list[StreamEntry]:
        entries = await self._read(run_id, pos)
        if entries or wait <= 0:
            return entries
        deadline = asyncio.get_running_loop().time() + wait
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            await self._wait(min(left, 1.0))
            entries = await self._read(run_id, pos)
            if entries:
                return entries
        return []

    async def _read(self, run_id: str, pos: int) -> list[StreamEntry]:
        if self.store.db.local:
            return self.store.read(run_id, pos)
        return await asyncio.to_thread(self.store.read, run_id, pos)

    async def _wait(self, seconds: float) -> None:
        if self.store.db.local:
            await asyncio.sleep(min(seconds, POLL_SECONDS))
            return
        await self._listen()
        self._heard.clear()
        with suppress(TimeoutError):
            await asyncio.wait_for(self._heard.wait(), seconds)

    async def _listen(self) -> None:
        """One LISTEN connection per reader, opened on first need; any notification wakes
        the reader, which then reads its own run's entries."""
        if self._listener is not None:
            return
        import psycopg

        assert self.settings.database_url is not None
        conn = await psycopg.AsyncConnection.connect(self.settings.database_url, autocommit=True)
        await conn.execute(f"LISTEN {CHANNEL}")
        self._listener = conn
        self._pump = asyncio.ensure_future(self._keep_listening(conn))

    async def _keep_listening(self, conn: Any) -> None:
        # Notifications are delivered while the connection is read: keep reading it.
        with suppress(Exception):
            async for _ in conn.notifies():
                self.notified += 1
                self._heard.set()

    async def close(self) -> None:
        if self._listener is not None:
            if self._pump is not None:
                self._pump.cancel()
            with suppress(Exception):
                await self._listener.close()
            self._listener = None


def shown(entries: list[StreamEntry]) -> dict[str, str]:
    """What a reader shows after these entries, per segment: its text so far, and an
    abandoned segment's text dropped (a retried attempt's reply replaces it, never joins
    it). Readers in the browser do the same (console/static/live.js)."""
    texts: dict[str, str] = {}
    for entry in entries:
        if entry.kind == "abandoned":
            texts.pop(entry.segment, None)
        elif entry.kind == "open":
            texts[entry.segment] = ""
        elif entry.kind == "delta" and entry.segment in texts:
            texts[entry.segment] += entry.text
    return texts
