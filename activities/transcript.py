"""The conversation, keyed by (run id, sequence number), and the model-call memo.

The workflow only ever holds sequence numbers and previews; whole messages live here.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity

from durable_agents.activities.claims import take_signature
from durable_agents.activities.fingerprints import now_text
from durable_agents.activities.ledger import EffectLedger
from durable_agents.activities.pruning import PrunedGuard
from durable_agents.activities.sql import Sealed, SqlDatabase, StoreSchema, Tx, apply_schema
from durable_agents.activities.store_holds import missing_records
from durable_agents.runtime.encryption import Keyring
from durable_agents.workflows.activity_io import SignatureClaim, TranscriptCopy

# The tables, as this release's migrations (activities/sql.py: StoreSchema).
SCHEMA = StoreSchema(
    "transcript",
    (
        """
CREATE TABLE IF NOT EXISTS transcript (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS model_calls (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    response TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (run_id, seq, fingerprint)
);
CREATE TABLE IF NOT EXISTS tool_lists (
    run_id TEXT NOT NULL,
    server TEXT NOT NULL,
    listing TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (run_id, server)
)
""",
    ),
)


class TranscriptStore:
    """With a keyring, messages and answers are stored encrypted; rows written before
    encryption was turned on still read."""

    def __init__(self, db: SqlDatabase, keyring: Keyring | None = None) -> None:
        self.db = db
        self.sealed = Sealed(keyring)
        apply_schema(db, SCHEMA)

    def put(self, run_id: str, seq: int, message: dict[str, Any]) -> None:
        self.put_many(run_id, [(seq, message)])

    def put_many(self, run_id: str, messages: list[tuple[int, dict[str, Any]]]) -> None:
        """Write messages at their sequence numbers, in one transaction. The workflow decides
        what goes at each seq, so a rewrite (a retry, a reset's new branch) replaces a row."""
        if not messages:
            return
        with self.db.transaction() as tx:
            for seq, message in messages:
                self._upsert(tx, run_id, seq, message)

    def read(
        self, run_id: str, before_seq: int | None = None, *, window_from: int | None = None
    ) -> list[dict[str, Any]]:
        """The conversation in order. With `window_from`: only the goal (seq 0) and the
        messages from there on, what a step-scoped model sees; only those rows are read,
        so a call costs the same at step 10 and at step 2,000."""
        sql = "SELECT seq, message FROM transcript WHERE run_id = ?"
        params: list[Any] = [run_id]
        if window_from is not None:
            sql += " AND (seq = 0 OR seq >= ?)"
            params.append(window_from)
        if before_seq is not None:
            sql += " AND seq < ?"
            params.append(before_seq)
        rows = self.db.query(sql + " ORDER BY seq", params)
        return [self.sealed.load(row["message"], _message_row(run_id, row["seq"])) for row in rows]

    def read_one(self, run_id: str, seq: int) -> dict[str, Any] | None:
        """One message by its number (None when it is not written yet)."""
        rows = self.db.query(
            "SELECT message FROM transcript WHERE run_id = ? AND seq = ?", [run_id, seq]
        )
        if not rows:
            return None
        message: dict[str, Any] = self.sealed.load(rows[0]["message"], _message_row(run_id, seq))
        return message

    def rows_before(self, run_id: str, before_seq: int) -> int:
        """How many of the run's messages this store holds below `before_seq` (the key's
        own index answers it: as cheap at step 2,000 as at step 2)."""
        rows = self.db.query(
            "SELECT count(*) AS n FROM transcript WHERE run_id = ? AND seq < ?",
            (run_id, before_seq),
        )
        return int(rows[0]["n"])

    def rows_of(self, run_id: str) -> int:
        """How many messages of the run this store holds in all."""
        rows = self.db.query("SELECT count(*) AS n FROM transcript WHERE run_id = ?", (run_id,))
        return int(rows[0]["n"])

    def recall(self, run_id: str, seq: int, fingerprint: str) -> dict[str, Any] | None:
        """The stored answer to exactly this request at this point of the run, if any."""
        rows = self.db.query(
            "SELECT response FROM model_calls WHERE run_id=? AND seq=? AND fingerprint=?",
            (run_id, seq, fingerprint),
        )
        row = _answer_row(run_id, seq, fingerprint)
        return self.sealed.load(rows[0]["response"], row) if rows else None

    def remember(
        self,
        run_id: str,
        seq: int,
        fingerprint: str,
        response: dict[str, Any],
        message: dict[str, Any],
    ) -> None:
        """Store the model's answer and its transcript message in one transaction."""
        with self.db.transaction() as tx:
            tx.execute(
                "INSERT INTO model_calls (run_id, seq, fingerprint, response, created_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, seq, fingerprint) DO NOTHING",
                (
                    run_id,
                    seq,
                    fingerprint,
                    self.sealed.dump(response, _answer_row(run_id, seq, fingerprint)),
                    now_text(),
                ),
            )
            self._upsert(tx, run_id, seq, message)

    def put_tool_list(self, run_id: str, server: str, tools: dict[str, Any]) -> None:
        """An MCP server's tools as a run recorded them when it started (name -> the
        description and schema the model is shown): the history keeps only their names."""
        with self.db.transaction() as tx:
            tx.execute(
                "INSERT INTO tool_lists (run_id, server, listing, created_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (run_id, server) DO UPDATE SET listing=excluded.listing",
                (run_id, server, self.sealed.dump(tools, _list_row(run_id, server)), now_text()),
            )

    def tool_lists(self, run_id: str) -> dict[str, Any]:
        """Every MCP tool the run recorded, by the name the model sees."""
        rows = self.db.query("SELECT server, listing FROM tool_lists WHERE run_id = ?", (run_id,))
        found: dict[str, Any] = {}
        for row in rows:
            found |= self.sealed.load(row["listing"], _list_row(run_id, row["server"]))
        return found

    def copy(self, from_run_id: str, to_run_id: str, before_seq: int) -> int:
        """The rows before `before_seq`, each at its own seq, in one transaction. Sealed
        rows are bound to their run and seq, so each is opened and sealed anew for its new
        row; plain rows are copied by the database."""
        if self.sealed.keyring is None:
            with self.db.transaction() as tx:
                tx.execute(
                    "INSERT INTO transcript (run_id, seq, role, message, created_at)"
                    " SELECT ?, seq, role, message, ? FROM transcript"
                    " WHERE run_id = ? AND seq < ?"
                    " ON CONFLICT (run_id, seq) DO UPDATE"
                    " SET role=excluded.role, message=excluded.message",
                    (to_run_id, now_text(), from_run_id, before_seq),
                )
            self._copy_tool_lists(from_run_id, to_run_id)
            return self._count(to_run_id, before_seq)
        self._copy_tool_lists(from_run_id, to_run_id)
        rows = self.db.query(
            "SELECT seq, message FROM transcript WHERE run_id = ? AND seq < ? ORDER BY seq",
            (from_run_id, before_seq),
        )
        opened = [
            (
                int(row["seq"]),
                self.sealed.load(row["message"], _message_row(from_run_id, row["seq"])),
            )
            for row in rows
        ]
        self.put_many(to_run_id, opened)
        return self._count(to_run_id, before_seq)

    def _copy_tool_lists(self, from_run_id: str, to_run_id: str) -> None:
        """A fork calls the MCP tools its parent recorded, so it needs their schemas."""
        rows = self.db.query(
            "SELECT server, listing FROM tool_lists WHERE run_id = ?", (from_run_id,)
        )
        for row in rows:
            tools = self.sealed.load(row["listing"], _list_row(from_run_id, row["server"]))
            self.put_tool_list(to_run_id, row["server"], tools)

    def _count(self, run_id: str, before_seq: int) -> int:
        with self.db.transaction() as tx:
            rows = tx.execute(
                "SELECT count(*) AS n FROM transcript WHERE run_id = ? AND seq < ?",
                (run_id, before_seq),
            )
        return int(rows[0]["n"])

    def stored_answers(self, run_id: str) -> dict[int, str]:
        """When each answer of a run was stored, by sequence number (first store wins)."""
        rows = self.db.query(
            "SELECT seq, min(created_at) AS at FROM model_calls WHERE run_id=? GROUP BY seq",
            (run_id,),
        )
        return {int(row["seq"]): str(row["at"]) for row in rows}

    def _upsert(self, tx: Tx, run_id: str, seq: int, message: dict[str, Any]) -> None:
        tx.execute(
            "INSERT INTO transcript (run_id, seq, role, message, created_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, seq) DO UPDATE"
            " SET role=excluded.role, message=excluded.message",
            (
                run_id,
                seq,
                message["role"],
                self.sealed.dump(message, _message_row(run_id, seq)),
                now_text(),
            ),
        )


def _message_row(run_id: str, seq: int) -> str:
    return f"transcript/{run_id}/{seq}"


def _list_row(run_id: str, server: str) -> str:
    return f"tool_lists/{run_id}/{server}"


def _answer_row(run_id: str, seq: int, fingerprint: str) -> str:
    return f"model_calls/{run_id}/{seq}/{fingerprint}"


class TranscriptActivities:
    def __init__(self, store: TranscriptStore, pruned: PrunedGuard, ledger: EffectLedger) -> None:
        self.store = store
        self.pruned = pruned
        self.ledger = ledger

    @activity.defn(name="copy_transcript")
    async def copy_transcript(self, copy: TranscriptCopy) -> int:
        """Give a fork its parent's conversation up to where it restarts. Idempotent. A
        parent whose stored data was pruned gives nothing: the fork is refused. So is a
        signed fork whose signature another run (a terminated fork restarted under the
        same id) counted first."""
        await self.pruned.refuse_pruned(copy.from_run_id)
        if copy.rows_written:  # before the nonce is taken or a row copied
            found = await asyncio.to_thread(self.store.rows_of, copy.from_run_id)
            if found < copy.rows_written:
                raise missing_records(self.store.db, copy.from_run_id, found, copy.rows_written)
        if copy.signed_nonce is not None:
            fork = SignatureClaim(
                nonce=copy.signed_nonce, run_id=copy.to_run_id, what="signed fork"
            )
            await take_signature(self.ledger, fork)
        return await asyncio.to_thread(
            self.store.copy, copy.from_run_id, copy.to_run_id, copy.before_seq
        )
