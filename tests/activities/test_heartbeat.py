"""Work that cannot stop halfway finishes before a cancellation propagates, and an error it
ends in is said, not swallowed."""

from __future__ import annotations

import asyncio
import logging

import pytest
from temporalio import activity
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.heartbeat import finish_even_if_cancelled, heartbeating


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


async def test_heartbeats_go_on_while_the_activity_waits_and_stop_when_it_ends():
    """A beat every interval for as long as the work lasts (how Temporal sees a live
    worker, and how a cancel reaches the work); none at all for work shorter than one."""
    beats: list[object] = []
    enough = asyncio.Event()

    def heard(*details: object) -> None:
        beats.append(details)
        if len(beats) >= 3:
            enough.set()

    @activity.defn
    async def waits() -> None:
        async with heartbeating(interval=0.01):
            await enough.wait()  # three beats, however long the machine takes

    @activity.defn
    async def quick() -> None:
        async with heartbeating(interval=3600):
            pass

    env = ActivityEnvironment()
    env.on_heartbeat = heard
    await asyncio.wait_for(env.run(waits), timeout=60)
    count = len(beats)
    await asyncio.sleep(0.05)  # five intervals later: the timer went with the activity
    assert len(beats) == count >= 3
    await env.run(quick)
    assert len(beats) == count
