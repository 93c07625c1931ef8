"""On an encrypted stack the console decodes with the worker's keys and shows plaintext to
signed-in users only; the server holds ciphertext, and anonymous requests get nothing.
With PostgreSQL the console runs on a data dir of its own, as on another machine, and
still reads the transcript's texts."""

from __future__ import annotations

import pytest
from pydantic import SecretStr
from temporalio.client import Client

from durable_agents.control import runs
from durable_agents.runtime.client import connect
from durable_agents.runtime.encryption import new_key
from durable_agents.starters.demo import DEMO_GOAL
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunPolicy, RunRequest
from tests.conftest import (
    drop_schema,
    postgres_or_skip,
    run_id,
    settings_for,
    wait_for_approval,
)
from tests.console.live import live_console, signed_in
from tests.console.sse import events


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_plaintext_for_signed_in_users_only(dev_env, model_server, tmp_path, store) -> None:
    plain = settings_for(dev_env.client, tmp_path / "data", model_server.port)
    settings = plain.model_copy(update={"encryption_keys": SecretStr(f"k1={new_key()}")})
    console_settings = settings
    schema = None
    if store == "postgres":
        schema = f"c_{run_id('s').replace('-', '_')}"
        settings = settings.model_copy(
            update={"database_url": postgres_or_skip(), "database_schema": schema}
        )
        console_settings = settings.model_copy(update={"data_dir": tmp_path / "elsewhere"})
    try:
        await _plaintext_for_signed_in_users_only(dev_env, settings, console_settings)
    finally:
        if schema is not None:
            drop_schema(settings.database_url or "", schema)


async def _plaintext_for_signed_in_users_only(dev_env, settings, console_settings) -> None:
    client = await connect(settings)
    rid = run_id("secret")
    policy = RunPolicy(approvers={"pay_invoice": ["alice"]})
    request = RunRequest(goal=DEMO_GOAL, agent="invoice", label="pay-invoice", policy=policy)
    async with build_worker(await connect(settings, for_worker=True), settings):
        await runs.start_run(client, settings, request, rid)
        await wait_for_approval(client, rid)
        # What the server holds is ciphertext: a client without the keys reads no goal.
        keyless: Client = await Client.connect(
            dev_env.client.service_client.config.target_host, namespace=client.namespace
        )
        history = await keyless.get_workflow_handle(rid).fetch_history()
        assert "ACME" not in history.to_json()

        async with live_console(console_settings, client) as console:
            anonymous = console.client()
            for path in (f"/runs/{rid}", f"/runs/{rid}/panel", f"/runs/{rid}/events", "/"):
                response = await anonymous.get(path)
                assert response.status_code == 303 and "ACME" not in response.text
            http, token = await signed_in(console, "alice")
            page = await http.get(f"/runs/{rid}")
            assert "ACME Office Supplies" in page.text and "INV-1001" in page.text
            inbox = (await http.get("/")).text
            assert "INV-1001" in inbox
            async for event in events(http, f"/runs/{rid}/events"):
                if (
                    event.name == "moment"
                    and event.data["kind"] == "model"
                    and event.data["preview"]
                ):
                    assert "ACME" in event.data["preview"] or "INV-1001" in event.data["preview"]
                    break
            req = (await runs.get_state(client, rid)).pending_approvals[0].request_id
            form = {"csrf": token, "request_id": req, "decision": "approve"}
            assert (await http.post(f"/runs/{rid}/decide", data=form)).status_code == 303
            assert (await runs.wait_for_outcome(client, rid))["status"] == "completed"
