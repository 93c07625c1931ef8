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
    loop = asyncio.get_running_loop()
    next_beat: asyncio.TimerHandle

    def beat() -> None:
        nonlocal next_beat
        activity.heartbeat()
        next_beat = loop.call_later(every, beat)

    # The first beat after one interval: an activity that ends sooner (most do) costs the
    # server no heartbeat call, and the worker only a timer (no task to start and cancel,
    # which every model and tool call paid). The timer runs in this activity's context.
    next_beat = loop.call_later(every, beat)
    try:
        yield
    finally:
        next_beat.cancel()


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
