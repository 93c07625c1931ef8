"""A whole run with our stores on the real PostgreSQL: transcript, model memo and ledger."""

from __future__ import annotations

import uuid

import pytest

from durable_agents.activities.stores import Stores
from durable_agents.control import runs
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from tests.conftest import (
    count_effects,
    drop_schema,
    key_of,
    postgres_or_skip,
    run_id,
    wait_for_approval,
)


@pytest.fixture
def pg_settings(settings):
    url, schema = postgres_or_skip(), f"run_{uuid.uuid4().hex[:12]}"
    yield settings.model_copy(update={"database_url": url, "database_schema": schema})
    drop_schema(url, schema)


async def test_pay_invoice_with_stores_on_postgres(dev_env, pg_settings):
    client, rid = dev_env.client, run_id("pg")
    async with build_worker(client, pg_settings):
        await runs.start_run(client, pg_settings, RunRequest(goal="pay", label="pay-invoice"), rid)

        await wait_for_approval(client, rid)
        await runs.approve(client, rid, Decision(by="alice"))
        assert (await runs.wait_result(client, rid)).status == "completed"
        key = await key_of(client, rid)

    stores = Stores.open(pg_settings)
    assert stores.db.where.startswith("postgresql:")
    messages = stores.transcript.read(key)
    assert messages[0]["content"].startswith("Goal: pay")
    assert len(stores.transcript.stored_answers(key)) == 10  # every model answer memoized
    assert {e["tool"] for e in stores.ledger.effects(key)} == {
        "draft_email",
        "pay_invoice",
        "send_email",
    }
    assert count_effects(pg_settings, rid, "charge") == 1
    assert not pg_settings.database_path.exists()  # nothing of ours went to SQLite
