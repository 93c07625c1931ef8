"""The live log on both backends: segments open, take pieces and close; a new attempt's
segment abandons the one left open, and the old attempt can write no more; texts are
sealed at rest; a new reader starts before the reply streaming now."""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable_agents.activities import stream
from durable_agents.activities.stream import DeltaStore, LiveReply, SegmentClosed
from durable_agents.control.live import shown
from durable_agents.runtime.encryption import Keyring, KeyringError, new_key

KEYS = Keyring.parse(f"k1={new_key()}")


def test_a_retry_abandons_the_open_segment_and_fences_the_old_attempt(sql_database):
    log = DeltaStore(sql_database)
    first = log.open_segment("chat-1", 4, 1)
    log.append("chat-1", first, 4, "Hel")
    assert log.start_point("chat-1") == 0  # a reader arriving now sees this reply whole
    second = log.open_segment("chat-1", 4, 2)
    with pytest.raises(SegmentClosed):
        log.append("chat-1", first, 4, "lo")  # the old attempt lived on: refused
    log.append("chat-1", second, 4, "Hello")
    log.close("chat-1", second, 4, "done")
    log.close("chat-1", second, 4, "abandoned")  # closing twice changes nothing
    entries = log.read("chat-1")
    assert [(e.pos, e.kind) for e in entries] == [
        (1, "open"), (2, "delta"), (3, "abandoned"), (4, "open"), (5, "delta"), (6, "done"),
    ]  # fmt: skip
    assert shown(entries) == {second: "Hello"}
    assert [e.pos for e in log.read("chat-1", after=4)] == [5, 6]
    assert log.start_point("chat-1") == 6
    assert log.read("chat-2") == [] and log.start_point("chat-2") == 0
    assert log.forget("chat-1") == 6 and log.read("chat-1") == []


def test_texts_are_sealed_at_rest_and_bound_to_their_row(sql_database):
    log = DeltaStore(sql_database, KEYS)
    segment = log.open_segment("chat-s", 0, 1)
    log.append("chat-s", segment, 0, "refund 20 EUR to jane")
    [raw] = sql_database.query("SELECT body FROM stream_log WHERE kind = 'delta'")
    assert raw["body"].startswith("enc2:") and "jane" not in raw["body"]
    assert log.read("chat-s")[1].text == "refund 20 EUR to jane"
    with pytest.raises(KeyringError):
        DeltaStore(sql_database).read("chat-s")  # no keys: no text


def test_old_pieces_go_when_a_new_reply_opens(sql_database, monkeypatch):
    log = DeltaStore(sql_database)
    old = log.open_segment("chat-o", 0, 1)
    log.append("chat-o", old, 0, "long ago")
    log.close("chat-o", old, 0, "done")
    monkeypatch.setattr(stream, "KEEP_PIECES", timedelta(seconds=-1))
    log.open_segment("chat-o", 2, 1)
    kinds = [e.kind for e in log.read("chat-o")]
    assert kinds == ["open", "done", "open"]  # positions still rise: 1, 3, 4
    assert [e.pos for e in log.read("chat-o")] == [1, 3, 4]


async def test_a_live_reply_coalesces_pieces_and_closes_as_done_or_abandoned(sql_database):
    log = DeltaStore(sql_database)
    async with LiveReply(log, "chat-w", 1, 1) as sink:
        for piece in ("a", "b", "c"):
            sink(piece)
    with pytest.raises(RuntimeError):
        async with LiveReply(log, "chat-w", 3, 1) as sink:
            sink("partial")
            raise RuntimeError("the model call failed")
    entries = log.read("chat-w")
    assert "".join(e.text for e in entries if e.seq == 1) == "abc"
    closing = [(e.seq, e.kind) for e in entries if e.kind in ("done", "abandoned")]
    assert closing == [(1, "done"), (3, "abandoned")]
