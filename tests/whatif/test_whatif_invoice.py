"""What if, on the demo's pay-invoice runs: recorded runs played again against the same
agent, a stricter one and a model that pays twice, with the provider's journal watched."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.testing import WorkflowEnvironment

from activities.stores import Stores
from control import runs
from control.whatif import Variant, what_if
from control.whatif_record import recorded_run
from examples.invoice import invoice_agent
from examples.providers import Providers
from runtime.settings import Settings
from tests.conftest import approve_when_asked, run_id
from worker.shadow import build_shadow_worker
from workflows.contracts import RunRequest

RUNS = 3


async def _paid_runs(client: Any, settings: Settings, count: int) -> list[str]:
    ids = [run_id("inv") for _ in range(count)]
    request = RunRequest(goal="Pay invoice INV-1001", agent="invoice", label="pay-invoice")
    for rid in ids:
        await runs.start_run(client, settings, request, rid)
    await asyncio.gather(*(approve_when_asked(client, rid) for rid in ids))
    for rid in ids:
        assert (await runs.wait_result(client, rid)).status == "completed"
    return ids


def _journal(settings: Settings) -> list[dict[str, Any]]:
    providers = Providers.open(settings.data_dir)
    return [*providers.payments.effects(), *providers.email.effects()]


async def test_what_if(dev_env: WorkflowEnvironment, settings: Settings, worker: Any) -> None:
    client = dev_env.client
    ids = await _paid_runs(client, settings, RUNS)
    journal = _journal(settings)
    assert sum(e["operation"] == "charge" for e in journal) == RUNS
    stores = Stores.open(settings)
    recorded = [await recorded_run(client, stores, rid) for rid in ids]

    same = await what_if(client, settings, recorded, Variant(), build_shadow_worker)
    assert [r.differences for r in same.runs] == [[]] * RUNS
    assert same.totals.tokens_now == 0 and same.totals.tokens_then > 0
    assert _journal(settings) == journal

    strict = Variant(
        instructions=invoice_agent.instructions + " Never pay an invoice above 1,000 EUR."
    )
    stricter = await what_if(client, settings, recorded, strict, build_shadow_worker)
    print(stricter.model_dump_json(indent=1)[:3000])
    assert stricter.totals.effects_removed == 2 * RUNS
    removed = [c.tool for r in stricter.runs for c in r.effect_changes if c.change == "removed"]
    assert removed.count("pay_invoice") == RUNS
    assert _journal(settings) == journal

    twice = await what_if(
        client, settings, recorded, Variant(model="scripted/pay-invoice-twice"), build_shadow_worker
    )
    added = [c for r in twice.runs for c in r.effect_changes if c.change == "added"]
    assert [c.tool for c in added] == ["pay_invoice"] * RUNS
    assert _journal(settings) == journal
