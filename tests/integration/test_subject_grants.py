"""Memory has an owner (AGENT_SUBJECT_KEYS): a deployment that says who may start a run
about whom. A start through the plain `temporal` CLI naming a customer, with no grant or
with another run's grant, fails before the run's memory is touched; the starter holding a
key the deployment trusts for customers starts one that remembers; a Schedule's runs
count the grant made for that Schedule."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from durable_agents.control import conversations, memory, runs, schedules
from durable_agents.control.signer import read_signer, write_new_key
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import SubjectKeySetting
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor
from tests.conftest import eventually, run_id, settings_for
from tests.temporal_cli import own_dev_server, temporal

JANE = {"customer": "jane"}


@pytest.fixture(scope="module")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server of this module's own: its CLI calls meet no other file's load."""
    async with own_dev_server() as env:
        yield env


async def started_plainly(client, queue: str, wid: str, request: RunRequest, *extra: str) -> str:
    """Start through the `temporal` CLI, as anyone who reaches Temporal: why it failed."""
    started = await temporal(
        client, "workflow", "start", "--type", "AgentWorkflow", "--task-queue", queue,
        "--workflow-id", wid, "--input", request.model_dump_json(), *extra,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    return await refusal(client, wid)


async def refusal(client, wid: str) -> str:
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(client.get_workflow_handle(wid).result(), timeout=60)
    return str(getattr(failed.value.cause, "message", failed.value.cause))


async def test_only_a_granted_subject_reaches_its_memory(dev_env, model_server, tmp_path):
    settings = settings_for(dev_env.client, tmp_path / "data", model_server.port)
    public = write_new_key(tmp_path / "ops.key")
    settings = settings.model_copy(
        update={
            "subject_keys": {
                "ops": SubjectKeySetting(public_key=public, namespaces=["customer/*"])
            },
        }
    )
    starter = settings.model_copy(
        update={"signing_key_file": tmp_path / "ops.key", "signing_key_id": "ops"}
    )
    client = await connect(settings)
    async with build_worker(await connect(settings, for_worker=True), settings):
        # Anyone who reaches Temporal, naming jane, with no grant.
        plain = run_id("no-grant")
        request = conversations.conversation_request("support-chat", label="chat", subject=JANE)
        assert await started_plainly(client, settings.task_queue, plain, request) == (
            "refused: the run is about customer/jane, and no grant says it may be "
            "(AGENT_SUBJECT_KEYS)"
        )

        # The starter with the ops key: granted, it remembers for jane.
        granted = run_id("granted")
        await conversations.open_conversation(client, starter, request, granted)
        sent = conversations.message("Please remember that I prefer email", by="jane")
        reply = await conversations.send(client, granted, sent)
        assert reply.reply.startswith("Done: ")
        kept = memory.listing(settings, "customer/jane")
        assert [m.text for m in kept] == ["I prefer email"]

        # That run's grant, copied into another start: it names the run it was made for.
        events = client.get_workflow_handle(granted).fetch_history_events(page_size=1)
        started_with = await runs.started_request(client.data_converter, await anext(aiter(events)))
        assert started_with is not None and started_with.subject_grant is not None
        copied = run_id("copied")
        refused = await started_plainly(client, settings.task_queue, copied, started_with)
        assert f"grant is for '{granted}', not this run" in refused
        assert [m.text for m in memory.listing(settings, "customer/jane")] == ["I prefer email"]

        # A Schedule's runs: the grant names the Schedule, and Temporal says who started them.
        name = run_id("nightly")
        nightly = RunRequest(goal="Check jane's account", agent="support-chat", subject=JANE)
        await schedules.create(client, starter, name, nightly, every=timedelta(days=1))
        try:
            await schedules.trigger(client, name)

            async def scheduled_run() -> str | None:
                async for found in client.list_workflows(f"TemporalScheduledById = '{name}'"):
                    return found.id
                return None

            wid = await eventually(scheduled_run, within=60)
            outcome = await asyncio.wait_for(runs.wait_for_outcome(client, wid), timeout=60)
            assert outcome["status"] == "completed", outcome
            assert (await runs.get_state(client, wid)).memory_namespace == "customer/jane"
            # The Schedule's grant, copied into a start that says the Schedule started it
            # (any starter may set that search attribute), or named like the grant: refused.
            copied_grant = read_signer(tmp_path / "ops.key", "ops").subject_grant(
                f"schedule:{name}", JANE
            )
            posing = nightly.model_copy(update={"subject_grant": copied_grant})
            said = f"--search-attribute=TemporalScheduledById={json.dumps(name)}"
            refused = await started_plainly(client, settings.task_queue, f"{name}-x", posing, said)
            assert "not this run" in refused
            refused = await started_plainly(client, settings.task_queue, f"schedule:{name}", posing)
            assert "not this run" in refused
        finally:
            await schedules.delete(client, name)
        # Closed, its id started again with the grant copied from its history: refused.
        await conversations.close(client, granted, Actor(by="jane"))
        await runs.wait_for_outcome(client, granted)
        again = await started_plainly(client, settings.task_queue, granted, started_with)
        assert "this subject grant was used already, by run " in again


def test_subject_keys_are_json_in_the_environment(monkeypatch):
    from durable_agents.runtime.settings import load_settings

    entry = {"ops": {"public_key": "A" * 43 + "=", "namespaces": ["customer/*"]}}
    monkeypatch.setenv("AGENT_SUBJECT_KEYS", json.dumps(entry))
    assert load_settings().subject_keys["ops"].namespaces == ["customer/*"]
    entry["ops"]["public_key"] = "A" * 44  # base64, but 33 bytes: no Ed25519 key
    monkeypatch.setenv("AGENT_SUBJECT_KEYS", json.dumps(entry))
    with pytest.raises(ValueError, match="not a raw Ed25519 public key"):
        load_settings()
