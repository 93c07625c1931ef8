"""The worker dies at each instant of a payment, provoked by a fault hook rather than by
luck, and another worker finishes the run: the provider counts exactly one charge."""

from __future__ import annotations

import asyncio
import signal

import pytest

from durable_agents.activities.stores import Stores
from durable_agents.control import runs
from durable_agents.examples.providers import Providers
from durable_agents.infra.stack import worker_polling
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from tests.conftest import (
    count_effects,
    eventually,
    finish_on_a_new_worker,
    run_id,
    spawn_worker,
    wait_for_approval,
)


@pytest.mark.parametrize(
    ("instant", "provider_replays"),
    [
        ("before_provider", 0),  # the provider never heard of it: the retry pays
        ("after_provider", 1),  # paid, not recorded: the provider replays its answer
        ("after_ledger", 0),  # recorded, Temporal not told: the ledger answers
    ],
)
async def test_a_crash_at_each_instant_ends_in_one_payment(
    dev_env, settings, tmp_path, instant, provider_replays
):
    client, rid = dev_env.client, run_id(instant.replace("_", "-"))
    doomed = spawn_worker(settings, tmp_path / "w1.log", AGENT_CRASH_AT=f"{instant}:pay_invoice")
    try:
        await eventually(lambda: worker_polling(settings), within=30)
        await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)

        await wait_for_approval(client, rid)
        await runs.approve(client, rid, Decision(by="alice"))
        code = await asyncio.to_thread(doomed.wait, 60)
    finally:
        if doomed.poll() is None:
            doomed.kill()
    assert code == -signal.SIGKILL, "the fault hook must have killed the worker"

    result, store_key = await finish_on_a_new_worker(settings, client, rid, tmp_path / "w2.log")

    assert result.status == "completed"
    assert count_effects(settings, rid, "charge") == 1
    key = f"{store_key}/step-3/call_step3_t0_0"
    assert Providers.open(settings.data_dir).payments.replays(key) == provider_replays
    recorded = [
        e for e in Stores.open(settings).ledger.effects(store_key) if e["tool"] == "pay_invoice"
    ]
    assert [e["idempotency_key"] for e in recorded] == [key]
    assert count_effects(settings, rid, "send") == 1
