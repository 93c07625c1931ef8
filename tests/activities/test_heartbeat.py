"""Work that cannot stop halfway finishes before a cancellation propagates, and an error it
ends in is said, not swallowed."""

from __future__ import annotations

import asyncio
import logging

import pytest
from temporalio import activity
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.heartbeat import finish_even_if_cancelled


async def test_an_error_while_cancelled_is_logged(caplog):
    started = asyncio.Event()
    release = asyncio.Event()

    async def store_work() -> None:
        started.set()
        await release.wait()
        raise RuntimeError("database went away mid-commit")

    @activity.defn
    async def tool() -> None:
        await finish_even_if_cancelled(store_work())

    env = ActivityEnvironment()
    running = asyncio.ensure_future(env.run(tool))
    await started.wait()
    env.cancel()
    await asyncio.sleep(0)  # the cancellation reaches the activity; the work still runs
    assert not running.done()
    release.set()
    with caplog.at_level(logging.WARNING), pytest.raises(asyncio.CancelledError):
        await running
    assert "database went away mid-commit" in caplog.text
