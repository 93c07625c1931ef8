"""Memory across runs: what an agent remembers about a customer (a user, a case) outlives
the run, under a namespace the run's agent and metadata choose (workflows/memory.py).

Kept on the stores' database (SQLite with FTS5, PostgreSQL with its full-text search),
each memory's text and fields sealed like every store row (encrypted at rest with the
stores' keys, bound to the row). Search runs on an index of terms: the words themselves
without keys, and with keys a keyed hash of each word (a blind index), so an encrypted
store is searched without its texts in plain sight. A write is exactly once per
idempotency key: the key is the row's, and a second write under it answers the first.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from durable_agents.activities.fingerprints import now_text
from durable_agents.activities.sql import Sealed, SqlDatabase, StoreSchema, Tx, apply_schema
from durable_agents.runtime.encryption import Keyring

# What both backends keep; each adds its own search index (FTS5 rows sharing the rowid,
# a generated tsvector).
MEMORY_COLUMNS = """
    memory_id TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    idempotency_key TEXT UNIQUE,
    body TEXT NOT NULL,
    terms TEXT NOT NULL,
    vector TEXT,
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    created_at TEXT NOT NULL"""
SHARED_TABLES = """
CREATE INDEX IF NOT EXISTS memories_namespace ON memories (namespace, created_at);
CREATE TABLE IF NOT EXISTS memories_forgotten (
    idempotency_key TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    answer TEXT NOT NULL,
    created_at TEXT NOT NULL
);
"""
SQLITE_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS memories ({MEMORY_COLUMNS}
);
{SHARED_TABLES}
CREATE VIRTUAL TABLE IF NOT EXISTS memory_terms USING fts5 (terms)
"""
POSTGRES_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS memories ({MEMORY_COLUMNS},
    search tsvector GENERATED ALWAYS AS (to_tsvector('simple', terms)) STORED
);
{SHARED_TABLES}
CREATE INDEX IF NOT EXISTS memories_search ON memories USING GIN (search)
"""
# The tables, as this release's migrations (activities/sql.py: StoreSchema), one list per
# backend with the same versions.
# Which runs used a namespace's memories (recalled, remembered, forgot): forgetting the
# namespace clears those runs' stored copies too (control/memory.forget_subject).
READERS = """
CREATE TABLE IF NOT EXISTS memory_readers (
    namespace TEXT NOT NULL,
    run_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (namespace, run_id)
)
"""
SQLITE_TABLES = StoreSchema("memory", (SQLITE_SCHEMA, READERS))
POSTGRES_TABLES = StoreSchema("memory", (POSTGRES_SCHEMA, READERS))
WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Words shorter than this are not indexed (they match everything).
MIN_WORD = 2
# What the index's keyed terms are made with: a key of their own, derived from each of the
# stores' keys, never the encryption key itself.
TERMS_CONTEXT = b"durable-agents/memory-terms/v1"


@dataclass(frozen=True)
class MemoryRecord:
    memory_id: str
    namespace: str
    text: str
    fields: dict[str, Any]
    run_id: str
    step: int
    created_at: str

    def as_result(self) -> dict[str, Any]:
        """What a recall hands the model (and the history keeps)."""
        return {"memory_id": self.memory_id, "text": self.text, "fields": self.fields}


class MemoryStore:
    def __init__(self, db: SqlDatabase, keyring: Keyring | None = None) -> None:
        self.db = db
        self.sealed = Sealed(keyring)
        self.keyring = keyring
        apply_schema(db, SQLITE_TABLES if db.local else POSTGRES_TABLES)

    # -- writing -------------------------------------------------------------------------

    def remember(
        self,
        namespace: str,
        text: str,
        fields: dict[str, Any],
        *,
        key: str,
        run_id: str,
        step: int,
        vector: list[float] | None = None,
    ) -> str:
        """Keep a memory once per key: a write under a key already used answers the
        memory it made (a crash and a retry make one memory, not two). `vector`: its
        embedding, for a search by meaning (sealed like its text)."""
        with self.db.transaction() as tx:
            found = tx.execute(
                "SELECT memory_id, namespace FROM memories WHERE idempotency_key = ?", (key,)
            )
            if found:
                if found[0]["namespace"] != namespace:
                    raise ValueError(f"key {key!r} was used in another namespace")
                return str(found[0]["memory_id"])
            return self._insert(tx, namespace, text, fields, key, run_id, step, vector)

    def remember_many(self, namespace: str, texts: list[str], *, run_id: str) -> int:
        """Seed many memories at once (a benchmark, an import), in one transaction."""
        with self.db.transaction() as tx:
            for text in texts:
                self._insert(tx, namespace, text, {}, None, run_id, 0, None)
        return len(texts)

    def _insert(
        self,
        tx: Tx,
        namespace: str,
        text: str,
        fields: dict[str, Any],
        key: str | None,
        run_id: str,
        step: int,
        vector: list[float] | None,
    ) -> str:
        memory_id = f"mem-{uuid.uuid4().hex[:16]}"
        row = _row(namespace, memory_id)
        body = self.sealed.dump({"text": text, "fields": fields}, row)
        sealed_vector = self.sealed.dump(vector, row + ":vector") if vector else None
        terms = self.terms(namespace, text, fields)
        tx.execute(
            "INSERT INTO memories (memory_id, namespace, idempotency_key, body, terms, "
            "vector, run_id, step, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (memory_id, namespace, key, body, terms, sealed_vector, run_id, step, now_text()),
        )
        if self.db.local:
            # The index row shares the memory's rowid: found and removed by it.
            tx.execute(
                "INSERT INTO memory_terms (rowid, terms) SELECT rowid, ? FROM memories "
                "WHERE memory_id = ?",
                (terms, memory_id),
            )
        return memory_id

    def forget(self, namespace: str, memory_ids: list[str] | None = None) -> list[str]:
        """Remove memories of a namespace (all of them without ids, and the forget tool's
        receipts, which name it); the ids removed."""
        with self.db.transaction() as tx:
            if memory_ids is None:
                tx.execute("DELETE FROM memories_forgotten WHERE namespace = ?", (namespace,))
            return self._forget(tx, namespace, memory_ids)

    def forget_once(self, namespace: str, memory_id: str, key: str) -> dict[str, Any]:
        """The `forget` tool's side effect, once per key: a retry after a crash that
        removed the memory answers what the first attempt did, not "no such memory"."""
        with self.db.transaction() as tx:
            seen = tx.execute(
                "SELECT answer FROM memories_forgotten WHERE idempotency_key = ?", (key,)
            )
            if seen:
                answer: dict[str, Any] = json.loads(seen[0]["answer"])
                return answer
            gone = self._forget(tx, namespace, [memory_id])
            answer = (
                {"ok": True, "forgot": gone}
                if gone
                else {"ok": False, "error": f"no memory {memory_id} here"}
            )
            tx.execute(
                "INSERT INTO memories_forgotten (idempotency_key, namespace, answer, created_at) "
                "VALUES (?, ?, ?, ?)",
                (key, namespace, json.dumps(answer), now_text()),
            )
        return answer

    def _forget(self, tx: Tx, namespace: str, memory_ids: list[str] | None) -> list[str]:
        rows = tx.execute(
            "SELECT memory_id, rowid AS r FROM memories WHERE namespace = ?"
            if self.db.local
            else "SELECT memory_id, 0 AS r FROM memories WHERE namespace = ?",
            (namespace,),
        )
        gone = [r for r in rows if memory_ids is None or r["memory_id"] in memory_ids]
        for row in gone:
            self._delete(tx, str(row["memory_id"]), int(row["r"]))
        return [str(r["memory_id"]) for r in gone]

    def prune(self, older_than: str, dry_run: bool = False) -> int:
        """Remove memories written before `older_than` (ISO time): the retention. How
        many went (or would go, dry)."""
        with self.db.transaction() as tx:
            rows = tx.execute(
                "SELECT memory_id, rowid AS r FROM memories WHERE created_at < ?"
                if self.db.local
                else "SELECT memory_id, 0 AS r FROM memories WHERE created_at < ?",
                (older_than,),
            )
            for row in [] if dry_run else rows:
                self._delete(tx, str(row["memory_id"]), int(row["r"]))
            if not dry_run:
                tx.execute("DELETE FROM memories_forgotten WHERE created_at < ?", (older_than,))
        return len(rows)

    def _delete(self, tx: Tx, memory_id: str, rowid: int) -> None:
        tx.execute("DELETE FROM memories WHERE memory_id = ?", (memory_id,))
        if self.db.local:
            tx.execute("DELETE FROM memory_terms WHERE rowid = ?", (rowid,))

    # -- reading -------------------------------------------------------------------------

    def recall(self, namespace: str, query: str, limit: int, max_bytes: int) -> list[MemoryRecord]:
        """The memories of a namespace that best match the query's words, at most `limit`
        and `max_bytes` of text; with no word to search, the latest."""
        words = self.query_terms(namespace, query)
        if not words:
            return self._bounded(self.listing(namespace, limit), max_bytes)
        if self.db.local:
            # The terms are the namespace's own: the match reads only its memories.
            match = " OR ".join(f'"{w}"' for w in words)
            rows = self.db.query(
                "SELECT m.memory_id, m.namespace, m.body, m.run_id, m.step, m.created_at "
                "FROM memory_terms JOIN memories m ON m.rowid = memory_terms.rowid "
                "WHERE memory_terms MATCH ? AND m.namespace = ? ORDER BY bm25(memory_terms) "
                "LIMIT ?",
                (match, namespace, limit),
            )
        else:
            rows = self.db.query(
                "SELECT memory_id, namespace, body, run_id, step, created_at FROM memories "
                "WHERE namespace = ? AND search @@ to_tsquery('simple', ?) "
                "ORDER BY ts_rank(search, to_tsquery('simple', ?)) DESC, created_at DESC "
                "LIMIT ?",
                (namespace, " | ".join(words), " | ".join(words), limit),
            )
        return self._bounded([self._record(r) for r in rows], max_bytes)

    def recall_by_meaning(
        self, namespace: str, vector: list[float], limit: int, max_bytes: int
    ) -> list[MemoryRecord]:
        """The memories whose embeddings point nearest the query's (cosine), best first.
        Every vector of the namespace is read (and unsealed): for namespaces of thousands,
        not of the hundred thousands the word search serves in milliseconds."""
        rows = self.db.query(
            "SELECT memory_id, vector FROM memories WHERE namespace = ? AND vector IS NOT NULL",
            (namespace,),
        )
        scored = []
        for row in rows:
            memory_id = str(row["memory_id"])
            other = self.sealed.load(row["vector"], _row(namespace, memory_id) + ":vector")
            scored.append((_cosine(vector, other), memory_id))
        best = [memory_id for score, memory_id in sorted(scored, reverse=True)[:limit] if score > 0]
        found = [self.one(namespace, memory_id) for memory_id in best]
        return self._bounded([f for f in found if f is not None], max_bytes)

    def listing(self, namespace: str, limit: int = 100) -> list[MemoryRecord]:
        rows = self.db.query(
            "SELECT memory_id, namespace, body, run_id, step, created_at FROM memories "
            "WHERE namespace = ? ORDER BY created_at DESC LIMIT ?",
            (namespace, limit),
        )
        return [self._record(r) for r in rows]

    def one(self, namespace: str, memory_id: str) -> MemoryRecord | None:
        rows = self.db.query(
            "SELECT memory_id, namespace, body, run_id, step, created_at FROM memories "
            "WHERE namespace = ? AND memory_id = ?",
            (namespace, memory_id),
        )
        return self._record(rows[0]) if rows else None

    def note_reader(self, namespace: str, run_id: str) -> None:
        """A run used this namespace's memories: it holds copies (its transcript)."""
        with self.db.transaction() as tx:
            tx.execute(
                "INSERT INTO memory_readers (namespace, run_id, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (namespace, run_id) DO NOTHING",
                (namespace, run_id, now_text()),
            )

    def readers(self, namespace: str) -> list[str]:
        rows = self.db.query(
            "SELECT run_id FROM memory_readers WHERE namespace = ? ORDER BY run_id", (namespace,)
        )
        return [str(row["run_id"]) for row in rows]

    def drop_readers(self, namespace: str, run_ids: list[str]) -> None:
        with self.db.transaction() as tx:
            for run_id in run_ids:
                tx.execute(
                    "DELETE FROM memory_readers WHERE namespace = ? AND run_id = ?",
                    (namespace, run_id),
                )

    def namespaces(self) -> dict[str, int]:
        rows = self.db.query(
            "SELECT namespace, COUNT(*) AS n FROM memories GROUP BY namespace ORDER BY namespace"
        )
        return {str(r["namespace"]): int(r["n"]) for r in rows}

    def _record(self, row: dict[str, Any]) -> MemoryRecord:
        namespace, memory_id = str(row["namespace"]), str(row["memory_id"])
        body = self.sealed.load(row["body"], _row(namespace, memory_id))
        return MemoryRecord(
            memory_id=memory_id,
            namespace=namespace,
            text=body["text"],
            fields=body["fields"],
            run_id=str(row["run_id"]),
            step=int(row["step"]),
            created_at=str(row["created_at"]),
        )

    @staticmethod
    def _bounded(records: list[MemoryRecord], max_bytes: int) -> list[MemoryRecord]:
        """The records that fit, best first: one too large for what is left is passed
        over (never ends the recall), sized in UTF-8 bytes as the model gets them."""
        kept, used = [], 0
        for record in records:
            size = len(json.dumps(record.as_result(), ensure_ascii=False).encode())
            if used + size > max_bytes:
                continue
            kept.append(record)
            used += size
        return kept

    # -- the search index ----------------------------------------------------------------

    def query_terms(self, namespace: str, query: str) -> list[str]:
        """A query's terms in a namespace: under every key of the keyring (a memory
        indexed before a key rotation is still found), or its words without keys."""
        words = list(dict.fromkeys(_words(query)))
        if self.keyring is None:
            return [_plain(namespace, w) for w in words]
        return [
            _blind(_terms_key(secret), namespace, w)
            for secret in self.keyring.keys.values()
            for w in words
        ]

    def terms(self, namespace: str, text: str, fields: dict[str, Any]) -> str:
        """The terms a memory is indexed by, each the namespace's own (a word in one
        namespace is another term than in the next, so a search reads one namespace and
        the index says nothing across them): a keyed hash of each word with keys (a blind
        index, with a key derived for it), the word after a namespace mark without."""
        unique = dict.fromkeys(_words(" ".join([text, *(str(v) for v in fields.values())])))
        if self.keyring is None:
            return " ".join(_plain(namespace, w) for w in unique)
        secret = _terms_key(self.keyring.keys[self.keyring.active])
        return " ".join(_blind(secret, namespace, w) for w in unique)


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def _words(text: str) -> list[str]:
    return [w for w in WORD.findall(text.lower()) if len(w) >= MIN_WORD]


def _terms_key(secret: bytes) -> bytes:
    return hmac.new(secret, TERMS_CONTEXT, hashlib.sha256).digest()


def _plain(namespace: str, word: str) -> str:
    return f"n{hashlib.sha256(namespace.encode()).hexdigest()[:8]}x{word}"


def _blind(secret: bytes, namespace: str, word: str) -> str:
    mac = hmac.new(secret, f"{namespace}\0{word}".encode(), hashlib.sha256)
    return "t" + mac.hexdigest()[:20]


def _row(namespace: str, memory_id: str) -> str:
    return f"memories:{namespace}:{memory_id}"


@dataclass(frozen=True)
class BoundMemory:
    """The store on one run's namespace: what a memory tool's context holds
    (workflows/memory.MemoryAccess). Its writes carry the call's idempotency key."""

    store: MemoryStore
    namespace: str
    run_id: str
    step: int
    key: str | None
    recall_limit: int
    recall_bytes: int
    # Memories searched by meaning: the endpoint's embedding of a text (None: by words).
    embed: Callable[[str], list[float]] | None = None

    def remember(self, text: str, fields: dict[str, str]) -> dict[str, Any]:
        if self.key is None:
            raise RuntimeError("remember is a side effect: it needs the call's idempotency key")
        vector = self.embed(text) if self.embed is not None else None
        memory_id = self.store.remember(
            self.namespace, text, fields, key=self.key, run_id=self.run_id, step=self.step,
            vector=vector,
        )  # fmt: skip
        return {"ok": True, "memory_id": memory_id}

    def recall(self, query: str) -> dict[str, Any]:
        if self.embed is not None and query.strip():
            found = self.store.recall_by_meaning(
                self.namespace, self.embed(query), self.recall_limit, self.recall_bytes
            )
        else:
            found = self.store.recall(self.namespace, query, self.recall_limit, self.recall_bytes)
        return {"ok": True, "memories": [record.as_result() for record in found]}

    def forget(self, memory_id: str) -> dict[str, Any]:
        if self.key is None:
            raise RuntimeError("forget is a side effect: it needs the call's idempotency key")
        return self.store.forget_once(self.namespace, memory_id, self.key)


def embedder(base_url: str, api_key: str, model: str) -> Callable[[str], list[float]]:
    """A text's embedding from an OpenAI-compatible endpoint (the worker's model endpoint,
    or the offline model's deterministic ones). Called in a tool's thread."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)

    def embed(text: str) -> list[float]:
        response = client.embeddings.create(model=model, input=text)
        return list(response.data[0].embedding)

    return embed
