"""The transcript store and the model-call memo, on SQLite and on PostgreSQL."""

from __future__ import annotations

from durable_agents.activities.transcript import TranscriptStore
from durable_agents.runtime.encryption import Keyring, new_key


def test_messages_come_back_in_sequence_and_before_a_point(sql_database):
    store = TranscriptStore(sql_database)
    for seq in (2, 0, 1):
        store.put("r", seq, {"role": "user", "content": f"m{seq}"})
    store.put("other", 0, {"role": "user", "content": "elsewhere"})
    assert [m["content"] for m in store.read("r")] == ["m0", "m1", "m2"]
    assert [m["content"] for m in store.read("r", before_seq=2)] == ["m0", "m1"]


def test_a_rewrite_at_a_sequence_replaces_the_message(sql_database):
    store = TranscriptStore(sql_database)
    store.put("r", 0, {"role": "user", "content": "old"})
    store.put("r", 0, {"role": "user", "content": "new"})
    assert store.read("r") == [{"role": "user", "content": "new"}]


def test_an_answer_is_recalled_only_for_the_same_request(sql_database):
    store = TranscriptStore(sql_database)
    reply = {"role": "assistant", "content": "hi"}
    store.remember("r", 3, "fp-a", {"choices": [{"message": reply}]}, reply)
    assert store.recall("r", 3, "fp-a") == {"choices": [{"message": reply}]}
    assert store.recall("r", 3, "fp-b") is None  # a changed request is a new call
    assert store.recall("r", 4, "fp-a") is None
    assert store.read("r") == [reply]
    store.remember("r", 3, "fp-a", {"choices": []}, reply)  # a late duplicate changes nothing
    assert store.recall("r", 3, "fp-a") == {"choices": [{"message": reply}]}
    assert list(store.stored_answers("r")) == [3]


def test_a_fork_copy_keeps_each_message_at_its_own_seq(sql_database):
    store = TranscriptStore(sql_database)
    for seq in (0, 1, 3, 4):  # seq 2 never written (a tool call cancelled in flight, say)
        store.put("parent", seq, {"role": "user", "content": f"m{seq}"})
    assert store.copy("parent", "child", before_seq=4) == 3
    assert store.read("child") == [{"role": "user", "content": f"m{s}"} for s in (0, 1, 3)]
    assert store.read("child", window_from=3) == [
        {"role": "user", "content": "m0"},
        {"role": "user", "content": "m3"},
    ]


def test_an_mcp_tool_list_is_kept_sealed_per_run_and_copied_for_a_fork(sql_database):
    keyring = Keyring.parse(f"k1={new_key()}")
    store = TranscriptStore(sql_database, keyring)
    tools = {"search_notes": {"description": "Search", "parameters": {"type": "object"}}}
    store.put_tool_list("run-a@1", "kb", tools)
    store.put_tool_list("run-a@1", "kb", tools | {"x": {"description": "X", "parameters": {}}})
    store.put_tool_list("run-a@1", "web", {"echo": {"description": "E", "parameters": {}}})
    assert set(store.tool_lists("run-a@1")) == {"search_notes", "x", "echo"}
    assert store.tool_lists("run-b@1") == {}
    raw = sql_database.query("SELECT listing FROM tool_lists WHERE run_id = ?", ("run-a@1",))
    assert all("search_notes" not in row["listing"] for row in raw)  # sealed at rest
    store.copy("run-a@1", "fork@2", before_seq=0)
    assert store.tool_lists("fork@2") == store.tool_lists("run-a@1")
