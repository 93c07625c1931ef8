"""Memories as people see and delete them (`agentctl memory`, the Python client): a
namespace's memories with who wrote them (run and step), one memory whole, and forgetting
a namespace or some of its memories, saying what was removed (a person's right to
deletion). Read where this machine reaches the stores, as control/stored.py says."""

from __future__ import annotations

from durable_agents.activities.memory import MemoryRecord, MemoryStore
from durable_agents.activities.stores import open_database
from durable_agents.control.runs import RunError
from durable_agents.control.stored import check_reachable, store_errors
from durable_agents.runtime.encryption import keyring_from
from durable_agents.runtime.settings import Settings


def memory_store(settings: Settings) -> MemoryStore:
    check_reachable(settings)
    with store_errors(settings):
        return MemoryStore(open_database(settings), keyring_from(settings))


def namespaces(settings: Settings) -> dict[str, int]:
    store = memory_store(settings)
    with store_errors(settings):
        return store.namespaces()


def listing(settings: Settings, namespace: str, limit: int = 100) -> list[MemoryRecord]:
    store = memory_store(settings)
    with store_errors(settings):
        return store.listing(namespace, limit)


def one(settings: Settings, namespace: str, memory_id: str) -> MemoryRecord:
    store = memory_store(settings)
    with store_errors(settings):
        found = store.one(namespace, memory_id)
    if found is None:
        raise RunError(f"no memory {memory_id} in {namespace}")
    return found


def forget(settings: Settings, namespace: str, memory_ids: list[str] | None = None) -> list[str]:
    """Remove a namespace's memories (all, or those named); the ids removed."""
    store = memory_store(settings)
    with store_errors(settings):
        if memory_ids is not None:  # every id checked first: a typo removes nothing
            missing = sorted(i for i in set(memory_ids) if store.one(namespace, i) is None)
            if missing:
                raise RunError(f"no memory {', '.join(missing)} in {namespace}; none removed")
        return store.forget(namespace, memory_ids)
