"""Store encryption binds each value to its row: a ciphertext moved to another row does
not decrypt; values sealed before binding existed still read."""

from __future__ import annotations

import base64
import json

import pytest

from durable_agents.activities.ledger import EffectLedger
from durable_agents.activities.sql import Sealed, SqliteDatabase
from durable_agents.activities.transcript import TranscriptStore
from durable_agents.runtime.encryption import Keyring, KeyringError, new_key

KEYS = Keyring.parse(f"k1={new_key()}")


def test_two_rows_ciphertexts_cannot_be_swapped(tmp_path):
    store = TranscriptStore(SqliteDatabase(tmp_path / "s.sqlite3"), KEYS)
    store.put("run-a", 0, {"role": "user", "content": "pay 10 EUR"})
    store.put("run-b", 0, {"role": "user", "content": "pay 10000 EUR"})
    with store.db.transaction() as tx:
        [b] = tx.execute("SELECT message FROM transcript WHERE run_id='run-b'")
        tx.execute("UPDATE transcript SET message=? WHERE run_id='run-a'", (b["message"],))
    with pytest.raises(KeyringError, match="moved from another row"):
        store.read("run-a")
    assert store.read("run-b")[0]["content"] == "pay 10000 EUR"


def test_a_ledger_result_is_bound_to_its_key(tmp_path):
    ledger = EffectLedger(SqliteDatabase(tmp_path / "l.sqlite3"), KEYS)
    ledger.record("key-1", "r", "pay_invoice", "fp1", {"ok": True, "amount": 10})
    ledger.record("key-2", "r", "pay_invoice", "fp2", {"ok": True, "amount": 10_000})
    with ledger.db.transaction() as tx:
        [two] = tx.execute("SELECT result FROM effects WHERE idempotency_key='key-2'")
        tx.execute("UPDATE effects SET result=? WHERE idempotency_key='key-1'", (two["result"],))
    with pytest.raises(KeyringError):
        ledger.recorded("key-1", "pay_invoice", "fp1")


def test_values_sealed_before_binding_still_read():
    key_id, data = KEYS.encrypt(json.dumps({"content": "old"}).encode())
    legacy = f"enc1:{key_id}:{base64.b64encode(data).decode()}"
    assert Sealed(KEYS).load(legacy, "transcript/r/0") == {"content": "old"}


def test_an_encrypted_fork_copy_reseals_each_row_for_its_new_place(tmp_path):
    store = TranscriptStore(SqliteDatabase(tmp_path / "f.sqlite3"), KEYS)
    store.put_many(
        "parent", [(0, {"role": "user", "content": "goal"}), (1, {"role": "user", "content": "x"})]
    )
    assert store.copy("parent", "child", before_seq=2) == 2
    assert [m["content"] for m in store.read("child")] == ["goal", "x"]
