"""Heartbeats while an activity waits: they let Temporal notice a dead worker within
the heartbeat timeout, and they are how a cancellation reaches a running activity."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from temporalio import activity

T = TypeVar("T")
INTERVAL_SECONDS = 1.0


@contextlib.asynccontextmanager
async def heartbeating(interval: float | None = None) -> AsyncIterator[None]:
    """Heartbeat every `interval` seconds (default INTERVAL_SECONDS, read at each call)."""
    every = INTERVAL_SECONDS if interval is None else interval

    async def beat() -> None:
        # The first beat after one interval: an activity that ends sooner (most do) costs
        # the server no heartbeat call at all.
        while True:
            await asyncio.sleep(every)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def finish_even_if_cancelled(work: Awaitable[T]) -> T:
    """Let work that cannot be interrupted halfway (one database transaction) finish
    before a cancellation propagates, so no effect is ever left half done."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        try:
            await task
        except Exception as err:  # the cancellation wins, but what failed is said
            activity.logger.warning("work finished with an error while cancelled: %s", err)
        raise
