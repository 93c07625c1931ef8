"""Cancel waits for a tool's store work: a cancellation that arrives between the provider
acting and the ledger recording it is held until the ledger has the record, so no effect
is ever left unrecorded (and repeated by the retry of a fork or rewind)."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest
from temporalio.testing import ActivityEnvironment

from durable_agents.activities.crash_points import CrashPoints
from durable_agents.activities.stores import Stores
from durable_agents.activities.tools import ToolActivities
from durable_agents.examples.providers import Providers
from tests.conftest import EXAMPLE_AGENTS, pay_invoice_call

KEY = pay_invoice_call("cancel@first").idempotency_key


class HeldAfterProvider(CrashPoints):
    """Holds the tool between the provider's charge and the ledger's record."""

    def __init__(self, settings) -> None:
        super().__init__("after_provider", settings.data_dir)
        self.arrived = threading.Event()
        self.release = threading.Event()

    def reached(self, instant: str, tool: str, key: str) -> None:
        if instant == "after_provider":
            self.arrived.set()
            self.release.wait(timeout=30)


async def test_a_cancelled_tool_finishes_its_store_work_first(settings):
    stores = Stores.open(settings)
    held = HeldAfterProvider(settings)
    tools = ToolActivities(stores, held, EXAMPLE_AGENTS, settings.data_dir)
    pay = pay_invoice_call("cancel@first")
    env = ActivityEnvironment()
    running = asyncio.ensure_future(env.run(tools.run_tool, pay))
    await asyncio.to_thread(held.arrived.wait, 30)  # charged, not yet recorded
    env.cancel()
    # However long it is given, the activity does not end while the record is pending.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(running), timeout=0.5)
    assert not running.done()
    assert stores.ledger.effects("cancel@first") == []
    held.release.set()
    with pytest.raises(asyncio.CancelledError):
        await running
    # When the cancellation is reported, the effect is recorded: one charge, one record.
    [recorded] = stores.ledger.effects("cancel@first")
    assert recorded["idempotency_key"] == KEY and recorded["result"]["ok"]
    charges = Providers.open(settings.data_dir).payments.effects("cancel@first")
    assert [c["idempotency_key"] for c in charges] == [KEY]
