"""Our own stores' database: SQLite under the data dir by default, PostgreSQL when
AGENT_DATABASE_URL is set. The same SQL runs on both (`?` placeholders, ON CONFLICT)."""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, Protocol, TypeVar
from urllib.parse import urlsplit

from durable_agents.runtime.encryption import Keyring, KeyringError
from durable_agents.runtime.extras import require

Row = dict[str, Any]
T = TypeVar("T")
P = ParamSpec("P")


class Tx(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...


class SqlDatabase(Protocol):
    """A place for our stores; each `transaction()` commits as a whole or not at all."""

    # A local file whose calls take well under a millisecond (SQLite), or a server a call
    # may wait on (PostgreSQL).
    local: bool

    @property
    def where(self) -> str: ...

    def transaction(self) -> Any: ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...


class _SqliteTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        cursor = self.conn.execute(sql, tuple(params))
        return [dict(row) for row in cursor.fetchall()] if cursor.description else []


WAL_SWITCH_SECONDS = 30.0


def _turn_wal_on(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL, waiting out other processes doing the same.

    Switching needs the file to itself, and SQLite answers "database is locked" at once
    rather than calling the busy handler while another connection holds it (a fleet's
    first start opens the same fresh file together), so we wait here, up to the busy
    timeout, instead.
    """
    deadline = time.monotonic() + WAL_SWITCH_SECONDS
    pause = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


class SqliteDatabase:
    local = True

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = self._connect()
        try:
            _turn_wal_on(conn)
        finally:
            conn.close()

    @property
    def where(self) -> str:
        return f"sqlite:{self.path}"

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout=30000")
        # WAL with synchronous=NORMAL: a commit survives any process crash (worker, server),
        # without an fsync per commit; only an OS crash or power loss may drop the last
        # commits. Production stores belong on PostgreSQL (AGENT_DATABASE_URL).
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _connection(self) -> sqlite3.Connection:
        """One connection per thread, kept: opening one per call costs more than the call."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield _SqliteTx(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """One statement on its own: under WAL a read sees a consistent snapshot without
        the write lock, so readers never queue behind writers or each other."""
        return _SqliteTx(self._connection()).execute(sql, params)


class _PostgresTx:
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        cursor = self.conn.execute(sql.replace("?", "%s"), tuple(params))
        return list(cursor.fetchall()) if cursor.description else []


def database_errors() -> tuple[type[Exception], ...]:
    """PostgreSQL's errors where its driver is installed (the [postgres] extra): SQLite
    users have no driver to import."""
    try:
        import psycopg
    except ModuleNotFoundError:
        return ()
    return (psycopg.Error,)


class PostgresDatabase:
    """One connection per thread: activities run their store calls on worker threads."""

    local = False

    def __init__(self, url: str, schema: str | None = None) -> None:
        # Imported here: SQLite users need no PostgreSQL driver ([postgres] extra).
        psycopg: Any = require("psycopg", part="AGENT_DATABASE_URL (PostgreSQL)", extra="postgres")
        self._psycopg = psycopg
        self.url = url
        self.schema = schema
        self._local = threading.local()
        if schema:
            with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
                # Processes starting together would both create it (IF NOT EXISTS is no
                # guard against a concurrent create): they take turns, as migrations do.
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')

    @property
    def where(self) -> str:
        """The server and database, never the user or password."""
        return "postgresql:" + redacted_url(self.url)

    def _connection(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            from psycopg.rows import dict_row

            options = f"-c search_path={self.schema}" if self.schema else ""
            conn = self._psycopg.connect(
                self.url, row_factory=dict_row, options=options, autocommit=True
            )
            self._local.conn = conn
        return conn

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        conn = self._connection()
        try:
            with conn.transaction():
                yield _PostgresTx(conn)
        except self._psycopg.OperationalError:
            conn.close()  # a broken connection is replaced on the next call
            raise

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with self.transaction() as tx:
            return tx.execute(sql, params)


def redacted_url(url: str) -> str:
    """A database URL as it may be shown or logged: host, port and database only."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"//{host}{port}{parts.path}"


@dataclass(frozen=True)
class StoreSchema:
    """A store's tables as the migrations that made them, oldest first: the n-th takes a
    database from version n-1 to n. A release that changes a table adds one; it never
    edits one already released (a database of that release has run it)."""

    name: str
    migrations: tuple[str, ...]

    @property
    def version(self) -> int:
        return len(self.migrations)


class StoreSchemaNewer(RuntimeError):
    """The database was written by a newer release: this one must not touch it."""


# Which version of each store's tables a database holds. A database of a release from
# before versions has the tables and no row here: it is at version 0, and version 1 is
# those very tables, created only where missing.
VERSIONS_TABLE = """
CREATE TABLE IF NOT EXISTS store_schemas (store TEXT PRIMARY KEY, version INTEGER NOT NULL)
"""


# The PostgreSQL advisory lock migrations take turns under (a constant of ours).
SCHEMA_LOCK = 0x64757261626C65  # "durable"


def apply_schema(db: SqlDatabase, schema: StoreSchema) -> None:
    """Bring the store's tables to this release's version, in place and in one transaction
    (every migration or none: two workers starting together take turns); a database a
    newer release wrote is refused (StoreSchemaNewer, one line) and nothing is written."""
    with db.transaction() as tx:
        if not db.local:  # SQLite's BEGIN IMMEDIATE holds the write lock already
            # Before the versions table exists too: two first starts would both create it.
            tx.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))
        tx.execute(VERSIONS_TABLE)
        rows = tx.execute("SELECT version FROM store_schemas WHERE store=?", (schema.name,))
        found = int(rows[0]["version"]) if rows else 0
        if found > schema.version:
            raise StoreSchemaNewer(
                f"the {schema.name} tables at {db.where} are at version {found}, written by a "
                f"newer release (this one knows {schema.version}): run that release or a newer "
                "one; this one writes nothing there"
            )
        for migration in schema.migrations[found:]:
            for statement in migration.split(";"):
                if statement.strip():
                    tx.execute(statement)
        if found == schema.version:
            return
        if rows:
            tx.execute(
                "UPDATE store_schemas SET version=? WHERE store=?", (schema.version, schema.name)
            )
        else:
            tx.execute(
                "INSERT INTO store_schemas (store, version) VALUES (?, ?)",
                (schema.name, schema.version),
            )


async def store_call(db: SqlDatabase, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Store work from an activity: inline on a local SQLite file, where a thread hop costs
    more than the call itself (a tenth of the worker's CPU at twenty runs at once); in a
    thread on a database server, so a slow answer never stalls the event loop."""
    if db.local:
        return work(*args, **kwargs)
    return await asyncio.to_thread(work, *args, **kwargs)


# A sealed value: "enc2:<key id>:<base64 nonce+ciphertext>", bound to its row (associated
# data), so two rows' ciphertexts cannot be swapped unnoticed. "enc1:" values, written
# before binding, still read. Plain JSON never starts so.
SEALED_PREFIX = "enc2:"
UNBOUND_PREFIX = "enc1:"


class Sealed:
    """JSON values as stored: encrypted when a keyring is given, plain otherwise; either
    kind reads back, so turning encryption on keeps older rows readable. `row` names where
    the value lives (table and key); a value read from another row does not decrypt."""

    def __init__(self, keyring: Keyring | None) -> None:
        self.keyring = keyring

    def dump(self, value: Any, row: str) -> str:
        text = json.dumps(value)
        if self.keyring is None:
            return text
        key_id, data = self.keyring.encrypt(text.encode(), row.encode())
        return f"{SEALED_PREFIX}{key_id}:{base64.b64encode(data).decode()}"

    def load(self, stored: str, row: str) -> Any:
        if stored.startswith(SEALED_PREFIX):
            prefix, bound_to = SEALED_PREFIX, row.encode()
        elif stored.startswith(UNBOUND_PREFIX):
            prefix, bound_to = UNBOUND_PREFIX, None
        else:
            return json.loads(stored)
        if self.keyring is None:
            raise KeyringError(
                "the store holds encrypted data but no encryption keys are set; "
                "set AGENT_ENCRYPTION_KEYS"
            )
        key_id, _, encoded = stored.removeprefix(prefix).partition(":")
        return json.loads(self.keyring.decrypt(key_id, base64.b64decode(encoded), bound_to))
