"""No payload can wedge a run (invariant 8): every signal, update and query name, sent
every malformed variant through the real `temporal` CLI, leaves the state unchanged;
the run then completes normally."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from durable_agents.control import runs
from durable_agents.runtime.client import connect
from durable_agents.runtime.encryption import new_key
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor, Decision
from tests.conftest import eventually, run_id, settings_for, wait_for_approval
from tests.temporal_cli import own_dev_server, temporal


@pytest.fixture(scope="module")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server of this module's own: its CLI calls meet no other file's load."""
    async with own_dev_server() as env:
        yield env


SIGNALS = ("approve", "reject", "answer", "pause", "resume", "cancel", "child_spent", "budget")
UPDATES = ("decide", "submit_answer", "edit", "raise_budget")
QUERIES = ("state", "summary", "pending_approvals", "pending_questions")
# Each variant: the input flags of one malformed call.
VARIANTS: dict[str, list[str]] = {
    "no input": [],
    "two inputs": ["--input", "{}", "--input", '{"by": "mallory"}'],
    "binary/plain": ["--input", "hello", "--input-meta", "encoding=binary/plain"],
    "not an object": ["--input", "42"],
    "wrong fields": ["--input", '{"request_id": 7, "launch": true}'],
    "unknown key id": [
        "--input",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "--input-meta",
        "encoding=binary/encrypted",
        "--input-meta",
        "encryption-key-id=nobody-has-this",
    ],
    "truncated ciphertext": [
        "--input",
        "AAAA",
        "--input-meta",
        "encoding=binary/encrypted",
        "--input-meta",
        "encryption-key-id=k1",
    ],
}


def fingerprint(state) -> tuple[Any, ...]:
    """What a malformed input must not change."""
    return (
        state.status,
        state.pause_requested,
        state.cancel_requested_by,
        [(a.request_id, a.status, a.decided_by) for a in state.approvals],
        len(state.audit),
        state.moment,
    )


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_every_handler_survives_every_malformed_payload(
    dev_env, model_server, tmp_path, encrypted
):
    settings = settings_for(dev_env.client, tmp_path / "data", model_server.port)
    if encrypted:
        settings = settings.model_copy(update={"encryption_keys": SecretStr(f"k1={new_key()}")})
    client = await connect(settings)
    rid = run_id("malformed")
    async with build_worker(await connect(settings, for_worker=True), settings):
        await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)
        await wait_for_approval(client, rid)
        before = fingerprint(await runs.get_state(client, rid))

        for name in SIGNALS:
            for variant, flags in VARIANTS.items():
                sent = await temporal(
                    client, "workflow", "signal", "-w", rid, "--name", name, *flags
                )
                assert sent.returncode == 0, (name, variant, sent.stderr)
        for name in UPDATES:
            for variant, flags in VARIANTS.items():
                refused = await temporal(
                    client, "workflow", "update", "execute", "-w", rid, "--name", name, *flags
                )
                assert refused.returncode != 0, (name, variant, refused.stdout)
                assert "Workflow Task in failed state" not in refused.stderr, (name, variant)
        for name in QUERIES:
            for variant, flags in VARIANTS.items():
                if "key" in variant or "ciphertext" in variant:
                    continue  # a query's input is decoded by the caller's codec, not ours
                answered = await temporal(
                    client, "workflow", "query", "-w", rid, "--name", name, *flags
                )
                assert answered.returncode == 0, (name, variant, answered.stderr)

        # Signals are applied in order: once one sent after them all is applied, every
        # malformed one before it was seen and dropped. A query still answers.
        await runs.pause(client, rid, Actor(by="probe"))

        async def paused():
            return (await runs.get_state(client, rid)).pause_requested

        await eventually(paused)
        await runs.resume(client, rid, Actor(by="probe"))
        await eventually(lambda: _not(paused))
        after = await runs.get_state(client, rid)
        # pause + resume: two audit entries and two moments, nothing else changed.
        assert fingerprint(after)[:4] == before[:4]
        assert fingerprint(after)[4:] == (before[4] + 2, before[5] + 2)

        await runs.approve(client, rid, Decision(by="alice"))
        assert (await runs.wait_result(client, rid)).status == "completed"


async def _not(check):
    return not await check()
