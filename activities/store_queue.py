"""A store of its own, a task queue of its own (docs/operations.md, "Replicas with stores
of their own").

Temporal hands a task to any worker of its queue; a replica whose store does not hold the
run refuses it (activities/store_holds.py), and the run used to wait until a retry
happened to land on the right replica. So a worker whose store is its own (a SQLite file
under its data dir) also polls a queue named after that store, `<queue>@<store id>`:
Temporal's pattern for worker-local state. The run learns the queue from its first
store-bound activity (the worker stamps it on the result, worker/store_queue.py) and
sends the later ones there (workflows/phases/activity_call.py).

The id is the store's own, made once and kept inside it: a replica restarted on the same
store (its data dir, on any machine or path) polls the same queue, and two replicas
whose data dirs sit at the same path (a container's /data) never share one. A store
shared by every replica (PostgreSQL) needs no queue of its own: any worker holds every
run.
"""

from __future__ import annotations

import secrets

from durable_agents.activities.sql import SqlDatabase, StoreSchema, apply_schema

# Between the worker's task queue and its store's id in the store's queue name.
STORE_QUEUE_SEPARATOR = "@"

SCHEMA = StoreSchema(
    "store_identity",
    ("CREATE TABLE IF NOT EXISTS store_identity (name TEXT PRIMARY KEY, id TEXT NOT NULL)",),
)


class StoreIdentity:
    """The store's id: random, written on the store's first open, read ever after."""

    def __init__(self, db: SqlDatabase) -> None:
        self.db = db
        apply_schema(db, SCHEMA)

    def id(self) -> str:
        with self.db.transaction() as tx:
            # Two processes opening a fresh store together: the first insert wins.
            tx.execute(
                "INSERT INTO store_identity (name, id) VALUES ('store', ?) "
                "ON CONFLICT (name) DO NOTHING",
                (secrets.token_hex(6),),
            )
            return str(tx.execute("SELECT id FROM store_identity WHERE name = 'store'")[0]["id"])


def store_queue(task_queue: str, db: SqlDatabase) -> str | None:
    """The queue of the worker whose store is `db`, or None for a store every replica
    shares (PostgreSQL): its runs' activities stay on the main queue."""
    if not db.local:
        return None
    return f"{task_queue}{STORE_QUEUE_SEPARATOR}{StoreIdentity(db).id()}"
