"""The effect ledger and the providers behind it: a key's first result is its only result.
Run against SQLite and against the real PostgreSQL on this machine."""

from __future__ import annotations

import pytest

from durable_agents.activities.ledger import EffectLedger, IdempotencyConflict, fingerprint
from durable_agents.examples.providers import Providers
from durable_agents.examples.providers.base import ProviderConflict


@pytest.fixture
def ledger(sql_database):
    return EffectLedger(sql_database)


def test_a_recorded_key_returns_its_result(ledger):
    digest = fingerprint("send_email", {"to": "x"})
    assert ledger.recorded("r/1/c", "send_email", digest) is None
    assert ledger.record("r/1/c", "r", "send_email", digest, {"n": 1}) == {"n": 1}
    assert ledger.recorded("r/1/c", "send_email", digest) == {"n": 1}


def test_the_first_record_stands(ledger):
    digest = fingerprint("send_email", {"to": "x"})
    ledger.record("r/1/c", "r", "send_email", digest, {"n": 1})
    assert ledger.record("r/1/c", "r", "send_email", digest, {"n": 2}) == {"n": 1}
    assert len(ledger.effects("r")) == 1


def test_same_key_with_other_arguments_is_refused(ledger):
    ledger.record("r/1/c", "r", "send_email", fingerprint("send_email", {"to": "x"}), {"n": 1})
    with pytest.raises(IdempotencyConflict, match="already used for a different send_email"):
        ledger.recorded("r/1/c", "send_email", fingerprint("send_email", {"to": "y"}))


def test_a_provider_acts_once_per_key_and_counts_replays(tmp_path):
    email = Providers.open(tmp_path).email
    params = {"to": "a@b.co", "subject": "s", "body": "b"}
    first = email.call("k1", "send", params, "run-1")
    again = email.call("k1", "send", params, "run-1")
    assert first == again == {"ok": True, "status": "sent", "to": "a@b.co"}
    assert len(email.effects("run-1")) == 1
    assert email.replays("k1") == 1
    with pytest.raises(ProviderConflict):
        email.call("k1", "send", params | {"to": "c@d.co"}, "run-1")
    assert len(email.effects("run-1")) == 1


def test_a_refused_payment_is_not_an_effect(tmp_path):
    payments = Providers.open(tmp_path).payments
    wrong = {"invoice_id": "INV-1001", "amount": "1.00", "currency": "EUR"}
    assert payments.call("k", "charge", wrong, "r")["ok"] is False
    assert payments.effects("r") == []
