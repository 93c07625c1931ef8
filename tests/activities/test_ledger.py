"""The effect ledger: a key's first result is its only result."""

from __future__ import annotations

import pytest

from activities.ledger import IdempotencyConflict
from activities.stores import Stores


@pytest.fixture
def stores(tmp_path):
    return Stores.open(tmp_path / "agent.sqlite3")


def _insert(result):
    def perform(conn):
        conn.execute(
            "INSERT INTO outbox (run_id, idempotency_key, recipient, subject, body)"
            " VALUES ('r', 'k', 'a@b.c', 's', 'b')"
        )
        return result

    return perform


def outbox_rows(stores):
    with stores.db.connect() as conn:
        return conn.execute("SELECT count(*) FROM outbox").fetchone()[0]


def test_repeated_key_returns_the_recorded_result_without_acting_again(stores):
    first = stores.ledger.run_once("r/1/c", "r", "send_email", {"to": "x"}, _insert({"n": 1}))
    second = stores.ledger.run_once("r/1/c", "r", "send_email", {"to": "x"}, _insert({"n": 2}))
    assert first == ({"n": 1}, False)
    assert second == ({"n": 1}, True)
    assert outbox_rows(stores) == 1


def test_same_key_with_other_arguments_is_refused_and_does_nothing(stores):
    stores.ledger.run_once("r/1/c", "r", "send_email", {"to": "x"}, _insert({"n": 1}))
    with pytest.raises(IdempotencyConflict, match="already used for a different send_email"):
        stores.ledger.run_once("r/1/c", "r", "send_email", {"to": "y"}, _insert({"n": 2}))
    assert outbox_rows(stores) == 1


def test_an_effect_that_fails_leaves_no_ledger_row_and_no_effect(stores):
    def explode(conn):
        _insert({})(conn)
        raise RuntimeError("provider down")

    with pytest.raises(RuntimeError):
        stores.ledger.run_once("r/1/c", "r", "send_email", {"to": "x"}, explode)
    assert outbox_rows(stores) == 0
    assert stores.ledger.effects("r") == []
    # The retry then performs it, once.
    assert (
        stores.ledger.run_once("r/1/c", "r", "send_email", {"to": "x"}, _insert({"n": 1}))[1]
        is False
    )
    assert outbox_rows(stores) == 1
