"""Payload and store encryption: the server and our files never hold a run's words in
plain text; keys rotate without losing what older keys encrypted."""

from __future__ import annotations

import pytest
from pydantic import SecretStr
from temporalio.api.common.v1 import Payload

from durable_agents.activities.sql import SqliteDatabase
from durable_agents.activities.stores import Stores
from durable_agents.activities.transcript import TranscriptStore
from durable_agents.control import runs
from durable_agents.runtime.client import connect
from durable_agents.runtime.encryption import (
    ENCODING,
    EncryptionCodec,
    Keyring,
    KeyringError,
    keyring_from,
    new_key,
)
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest
from tests.conftest import key_of, run_id, settings_for

KEY_OLD, KEY_NEW = new_key(), new_key()
MARKER = "Zebra-Cobalt-7731"  # stands for a customer's words


def payload(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=f'"{text}"'.encode())


async def test_an_old_key_still_decrypts_after_rotation():
    old = EncryptionCodec(Keyring.parse(f"k1={KEY_OLD}"))
    [sealed] = await old.encode([payload(MARKER)])
    assert sealed.metadata["encoding"] == ENCODING and MARKER.encode() not in sealed.data
    assert sealed.metadata["encryption-key-id"] == b"k1"

    rotated = EncryptionCodec(Keyring.parse(f"k2={KEY_NEW}, k1={KEY_OLD}"))
    assert await rotated.decode([sealed]) == [payload(MARKER)]
    [fresh] = await rotated.encode([payload(MARKER)])
    assert fresh.metadata["encryption-key-id"] == b"k2"  # new data under the new key

    without_old = EncryptionCodec(Keyring.parse(f"k2={KEY_NEW}"))
    with pytest.raises(KeyringError, match="'k1', which is not among the configured keys"):
        await without_old.decode([sealed])


def test_store_rows_rotate_too_and_plain_rows_still_read(tmp_path):
    db = SqliteDatabase(tmp_path / "agent.sqlite3")
    TranscriptStore(db).put("r", 0, {"role": "user", "content": "written before encryption"})
    TranscriptStore(db, Keyring.parse(f"k1={KEY_OLD}")).put(
        "r", 1, {"role": "user", "content": MARKER}
    )
    rotated = TranscriptStore(db, Keyring.parse(f"k2={KEY_NEW},k1={KEY_OLD}"))
    rotated.put("r", 2, {"role": "user", "content": "after rotation"})
    contents = [m["content"] for m in rotated.read("r")]
    assert contents == ["written before encryption", MARKER, "after rotation"]
    with pytest.raises(KeyringError, match="no encryption keys are set"):
        TranscriptStore(db).read("r")


@pytest.mark.parametrize(
    "text, says",
    [
        ("", "no encryption key given"),
        ("k1", "expected id=base64key"),
        ("k1=not base64!", "not base64"),
        ("k1=AAAA", "3 bytes, AES-256 needs 32"),
        (f"k1={KEY_OLD},k1={KEY_NEW}", "appears twice"),
    ],
    ids=["empty", "no key", "not base64", "short", "an id twice"],  # the keys are random
)
def test_unusable_keys_are_refused_clearly(text, says):
    with pytest.raises(KeyringError, match=says):
        Keyring.parse(text)


def test_keys_from_a_file_and_a_missing_file_said_plainly(settings, tmp_path):
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"# newest first\nk2={KEY_NEW}\nk1={KEY_OLD}\n")
    keyring = keyring_from(settings.model_copy(update={"encryption_keys_file": keys_file}))
    assert keyring is not None and keyring.active == "k2" and set(keyring.keys) == {"k1", "k2"}
    missing = settings.model_copy(update={"encryption_keys_file": tmp_path / "gone"})
    with pytest.raises(KeyringError, match=r"AGENT_ENCRYPTION_KEYS_FILE=.*gone: No such file"):
        keyring_from(missing)
    assert keyring_from(settings) is None  # no keys: encryption off


def raw_bytes(history) -> bytes:
    return b"".join(event.SerializeToString() for event in history.events)


def files_bytes(data_dir) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file())


async def run_with_marker(dev_env, settings, rotated=None):
    """A run whose goal holds the marker; the history as the server exports it."""
    client = await connect(settings)
    rid = run_id("secret")
    request = RunRequest(goal=f"summarise the account of {MARKER}", label="long?steps=3")
    async with build_worker(client, settings):
        await runs.start_run(client, settings, request, rid)
        assert (await runs.wait_result(client, rid)).status == "completed"
        # Those who hold the key read it back, also after rotating to a new one.
        for reader in (settings, rotated or settings):
            assert MARKER in (await runs.get_state(await connect(reader), rid)).goal
            assert (
                MARKER
                in Stores.open(reader).transcript.read(await key_of(await connect(reader), rid))[0][
                    "content"
                ]
            )
    # Read back without a codec: what the server stores and exports.
    history = await dev_env.client.get_workflow_handle(rid).fetch_history()
    return raw_bytes(history)


async def test_with_keys_no_plaintext_reaches_history_or_stores(dev_env, model_server, tmp_path):
    base = settings_for(dev_env.client, tmp_path / "plain", model_server.port)
    # Without keys the marker is there to find: the checks below can fail.
    assert MARKER.encode() in await run_with_marker(dev_env, base)
    assert MARKER.encode() in files_bytes(base.data_dir)

    settings = base.model_copy(
        update={"data_dir": tmp_path / "sealed", "encryption_keys": SecretStr(f"k1={KEY_OLD}")}
    )
    rotated = settings.model_copy(
        update={"encryption_keys": SecretStr(f"k2={KEY_NEW},k1={KEY_OLD}")}
    )
    assert MARKER.encode() not in await run_with_marker(dev_env, settings, rotated)
    assert MARKER.encode() not in files_bytes(settings.data_dir)


async def failed_run_history(dev_env, settings) -> bytes:
    """A run the model endpoint refuses (HTTP 401 at planning): it fails, with the
    endpoint's words in its failure. The history as the server exports it."""
    client = await connect(settings)
    rid = run_id("failing")
    request = RunRequest(goal="pay", label="pay-invoice?fault=plan:401")
    async with build_worker(await connect(settings, for_worker=True), settings):
        await runs.start_run(client, settings, request, rid)
        outcome = await runs.wait_for_outcome(client, rid)
    assert outcome["status"] == "failed" and "HTTP 401" in outcome["error"]  # keys read it
    history = await dev_env.client.get_workflow_handle(rid).fetch_history()
    return raw_bytes(history)


async def test_failure_messages_and_stack_traces_are_encrypted(dev_env, model_server, tmp_path):
    plain = settings_for(dev_env.client, tmp_path / "plain", model_server.port)
    clear = await failed_run_history(dev_env, plain)
    # Without keys both are there to find: the checks below can fail.
    assert b"HTTP 401" in clear and b"activities/model.py" in clear
    keyed = plain.model_copy(
        update={"data_dir": tmp_path / "keyed", "encryption_keys": SecretStr(f"k1={KEY_OLD}")}
    )
    sealed = await failed_run_history(dev_env, keyed)
    assert b"HTTP 401" not in sealed and b"model endpoint refused" not in sealed
    assert b"activities/model.py" not in sealed  # no stack trace either
