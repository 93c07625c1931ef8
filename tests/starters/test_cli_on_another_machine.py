"""The CLI reads only what a user's machine can reach: with PostgreSQL stores every verb
works from a machine that has the Temporal address, the database URL and the keys alone
(here: another data dir); with SQLite stores, a verb that needs them says the store is
local to the worker."""

from __future__ import annotations

import asyncio
import json
import uuid

from pydantic import SecretStr
from typer.testing import CliRunner

from durable_agents.control import runs
from durable_agents.infra.stack import settings_env
from durable_agents.runtime.client import connect
from durable_agents.runtime.encryption import new_key
from durable_agents.starters.cli import app
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from tests.conftest import drop_schema, postgres_or_skip, settings_for, wait_for_approval


def cli(env: dict[str, str], *args: str):
    return CliRunner().invoke(app, list(args), env=env)


async def paid_run(client, settings) -> str:
    rid = f"remote-{uuid.uuid4().hex[:8]}"
    await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)
    await wait_for_approval(client, rid)
    await runs.approve(client, rid, Decision(by="alice"))
    assert (await runs.wait_result(client, rid)).status == "completed"
    return rid


async def test_with_postgres_every_verb_works_from_another_machine(dev_env, model_server, tmp_path):

    schema = f"remote_{uuid.uuid4().hex[:8]}"
    keys = f"k1={new_key()}"
    worker_side = settings_for(dev_env.client, tmp_path / "worker-data", model_server.port)
    worker_side = worker_side.model_copy(
        update={
            "database_url": postgres_or_skip(),
            "database_schema": schema,
            "encryption_keys": SecretStr(keys),
        }
    )
    try:
        async with build_worker(await connect(worker_side, for_worker=True), worker_side):
            rid = await paid_run(await connect(worker_side), worker_side)
        # The user's machine: its own (empty) data dir, the address, the URL and the keys.
        env = settings_env(worker_side) | {
            "AGENT_DATA_DIR": str(tmp_path / "laptop"),
            "AGENT_DATABASE_URL": worker_side.database_url or "",
            "AGENT_DATABASE_SCHEMA": schema,
            "AGENT_ENCRYPTION_KEYS": keys,
        }
        effects = await asyncio.to_thread(cli, env, "effects", rid, "--json")
        assert effects.exit_code == 0, effects.stderr
        tools = [e["tool"] for e in json.loads(effects.stdout)]
        assert tools == ["draft_email", "pay_invoice", "send_email"]
        timeline = await asyncio.to_thread(cli, env, "history", rid, "--json")
        assert timeline.exit_code == 0 and timeline.stderr == "", timeline.stderr
        outcomes = [row["outcome"] for row in json.loads(timeline.stdout) if row["outcome"]]
        assert any("pay_invoice" in text for text in outcomes)  # texts from the shared store
        exported = tmp_path / "laptop-export.json"
        assert (
            await asyncio.to_thread(cli, env, "export", rid, "-o", str(exported))
        ).exit_code == 0
        replayed = await asyncio.to_thread(cli, env, "replay", str(exported))
        assert replayed.exit_code == 0 and "replays cleanly" in replayed.stdout
        assert not (tmp_path / "laptop").exists()  # nothing was read from or made on its disk
    finally:
        drop_schema(worker_side.database_url or "", schema)


async def test_with_sqlite_a_verb_that_needs_the_store_says_it_is_the_workers(
    dev_env, model_server, tmp_path
):

    worker_side = settings_for(dev_env.client, tmp_path / "worker-data", model_server.port)
    async with build_worker(dev_env.client, worker_side):
        rid = await paid_run(dev_env.client, worker_side)
    env = settings_env(worker_side) | {"AGENT_DATA_DIR": str(tmp_path / "laptop")}
    effects = await asyncio.to_thread(cli, env, "effects", rid)
    assert effects.exit_code == 1
    assert effects.stderr.startswith(
        "error: no store here: our stores are SQLite, local to the worker"
    )
    timeline = await asyncio.to_thread(cli, env, "history", rid, "--json")
    assert timeline.exit_code == 0 and "local to the worker" in timeline.stderr
    assert not (tmp_path / "laptop").exists()
    # On the worker's own machine the same verb reads its store.
    here = await asyncio.to_thread(cli, settings_env(worker_side), "effects", rid, "--json")
    assert [e["tool"] for e in json.loads(here.stdout)] == [
        "draft_email",
        "pay_invoice",
        "send_email",
    ]
