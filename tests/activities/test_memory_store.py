"""The memory store on both backends: one memory per key, search by words within a
namespace only, bounded recall, forgetting and pruning; sealed at rest and searched
through a blind index with keys, across a key rotation."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from durable_agents.activities.memory import MemoryStore
from durable_agents.activities.sql import PostgresDatabase
from durable_agents.runtime.encryption import Keyring, new_key
from tests.conftest import drop_schema, postgres_or_skip

K1, K2 = new_key(), new_key()


def remember(store: MemoryStore, namespace: str, text: str, key: str) -> str:
    return store.remember(namespace, text, {}, key=key, run_id="run-1@x", step=2)


@pytest.mark.parametrize("keys", [None, f"k1={K1}"], ids=["plain", "sealed"])
def test_one_memory_per_key_found_by_its_words_in_its_namespace(sql_database, keys):
    store = MemoryStore(sql_database, Keyring.parse(keys) if keys else None)
    first = remember(store, "customer/jane", "Jane prefers email over phone", "key-1")
    again = remember(store, "customer/jane", "Jane prefers email over phone", "key-1")
    remember(store, "customer/jane", "Jane lives in Lyon", "key-2")
    remember(store, "customer/omar", "Omar prefers email too", "key-3")
    assert again == first and store.namespaces() == {"customer/jane": 2, "customer/omar": 1}
    found = store.recall("customer/jane", "Which channel? email", limit=5, max_bytes=4000)
    assert [m.text for m in found] == ["Jane prefers email over phone"]
    latest = store.recall("customer/jane", "?", limit=5, max_bytes=4000)  # no word: latest
    assert {m.text for m in latest} == {"Jane prefers email over phone", "Jane lives in Lyon"}
    assert store.recall("customer/jane", "jane", limit=1, max_bytes=4000)[0].namespace == (
        "customer/jane"
    )
    assert store.recall("customer/jane", "jane", limit=5, max_bytes=60) == []  # bounded
    rows = sql_database.query("SELECT body, terms FROM memories")
    if keys:
        assert all("Jane" not in r["body"] and "jane" not in r["terms"] for r in rows)
    assert store.forget("customer/jane", [first]) == [first]
    assert [m.text for m in store.listing("customer/jane")] == ["Jane lives in Lyon"]
    assert store.forget("customer/jane") and store.listing("customer/jane") == []
    assert store.prune("9999-01-01") == 1 and store.namespaces() == {}


def test_a_key_used_in_one_namespace_answers_no_memory_of_another(sql_database):
    """A write is once per key, but only within the namespace that made it: a key met again
    under another subject is refused, not answered with the first subject's memory id as
    if this write had been kept."""
    store = MemoryStore(sql_database)
    janes = remember(store, "customer/jane", "Jane prefers email", "key-1")
    with pytest.raises(ValueError, match=r"^key 'key-1' was used in another namespace$"):
        remember(store, "customer/omar", "Omar prefers phone", "key-1")
    assert store.listing("customer/omar") == []
    assert [m.memory_id for m in store.listing("customer/jane")] == [janes]


def test_a_key_rotation_keeps_older_memories_findable(sql_database):
    old = MemoryStore(sql_database, Keyring.parse(f"k1={K1}"))
    remember(old, "customer/jane", "Jane prefers email", "key-1")
    rotated = MemoryStore(sql_database, Keyring.parse(f"k2={K2},k1={K1}"))
    remember(rotated, "customer/jane", "Jane likes tea with email receipts", "key-2")
    found = rotated.recall("customer/jane", "email", limit=5, max_bytes=4000)
    assert {m.text for m in found} == {"Jane prefers email", "Jane likes tea with email receipts"}


def test_one_memory_too_large_for_the_bound_is_passed_over_not_the_end(sql_database):
    """700 CJK characters are 2,100 UTF-8 bytes: over a 1,000-byte bound, that memory is
    left out and the smaller ones after it still come back."""
    store = MemoryStore(sql_database)
    remember(store, "customer/jane", "note " + "注" * 700, "k-big")
    remember(store, "customer/jane", "note prefers email", "k-small")
    found = store.recall("customer/jane", "note", limit=10, max_bytes=1000)
    assert [record.text for record in found] == ["note prefers email"]


@pytest.mark.parametrize("value", ["", "..", "a/b", "-x"])
def test_a_subject_value_that_is_no_whole_part_makes_no_namespace(value):
    from durable_agents.workflows.memory import MemoryDeclarationError, resolve_namespace

    assert resolve_namespace("customer/{customer}", False, {"customer": "jane"}) == "customer/jane"
    with pytest.raises(MemoryDeclarationError, match="makes no namespace"):
        resolve_namespace("customer/{customer}", False, {"customer": value})


def test_forgetting_with_one_unknown_id_removes_nothing(tmp_path):
    from durable_agents.activities.stores import open_database
    from durable_agents.control import memory
    from durable_agents.control.runs import RunError
    from durable_agents.runtime.settings import Settings

    settings = Settings(data_dir=tmp_path)
    store = MemoryStore(open_database(settings))  # the worker's store, on its machine
    kept = remember(store, "customer/jane", "Jane prefers email", "k1")
    with pytest.raises(RunError, match="no memory typo in customer/jane; none removed"):
        memory.forget(settings, "customer/jane", [kept, "typo"])
    assert [r.memory_id for r in store.listing("customer/jane")] == [kept]
    assert memory.forget(settings, "customer/jane", [kept]) == [kept]


def test_overlapping_attempts_under_one_key_keep_one_memory_on_postgres():
    url, schema = postgres_or_skip(), f"t_{uuid.uuid4().hex[:12]}"
    first_inserted, second_looked = threading.Event(), threading.Event()

    class FirstAttempt(MemoryStore):
        def _insert(self, *args: Any) -> str:
            made = super()._insert(*args)
            first_inserted.set()  # not committed yet: the other attempt sees no row
            assert second_looked.wait(10), "the second attempt never looked"
            return made

    class SecondAttempt(MemoryStore):
        def _insert(self, *args: Any) -> str:
            second_looked.set()  # it found no row under the key: it writes
            return super()._insert(*args)

    def attempt(store: MemoryStore, results: dict[str, Any], name: str) -> None:
        try:
            results[name] = store.remember(
                "customer/jane", "Jane prefers email", {}, key="run-1@x/step-2/c1",
                run_id="run-1@x", step=2,
            )  # fmt: skip
        except Exception as err:  # the losing attempt fails; Temporal retries it
            results[name] = err

    try:
        db = PostgresDatabase(url, schema=schema)
        first, second = FirstAttempt(db), SecondAttempt(db)
        results: dict[str, Any] = {}
        one = threading.Thread(target=attempt, args=(first, results, "first"))
        one.start()
        assert first_inserted.wait(10)
        two = threading.Thread(target=attempt, args=(second, results, "second"))
        two.start()
        one.join(20)
        two.join(20)
        assert not one.is_alive() and not two.is_alive()
        rows = db.query("SELECT memory_id FROM memories WHERE namespace = 'customer/jane'")
        assert len(rows) == 1, f"written {len(rows)} times: {results}"
        assert isinstance(results["first"], str)
        # Its retry answers the memory the first attempt made.
        retried = SecondAttempt(db).remember(
            "customer/jane", "Jane prefers email", {}, key="run-1@x/step-2/c1",
            run_id="run-1@x", step=2,
        )  # fmt: skip
        assert retried == results["first"]
    finally:
        drop_schema(url, schema)
