"""The event protocol over real HTTP: moments once each, in order, with previews; a
reconnect with Last-Event-ID resumes exactly after it; events older than the state keeps
come from the history."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowQueryFailedError
from temporalio.testing import WorkflowEnvironment

from durable_agents.control import runs
from durable_agents.workflows.people_inputs import DecideRequest
from durable_agents.workflows.state import moments as state_records
from tests.console.live import LiveConsole, signed_in
from tests.console.runs_for_console import waiting_payment
from tests.console.sse import Event, events


async def _until(http, path: str, stop, last_event_id: str | None = None) -> list[Event]:
    seen: list[Event] = []
    async for event in events(http, path, last_event_id):
        seen.append(event)
        if stop(event):
            break
    return seen


def _moments(seen: list[Event]) -> list[dict[str, Any]]:
    return [e.data for e in seen if e.name == "moment"]


async def test_a_reconnect_resumes_after_the_last_event_nothing_twice_nothing_missed(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    client = dev_env.client
    state = await waiting_payment(client, console.settings)
    rid = state.run_id
    http, _ = await signed_in(console, "alice")
    path = f"/runs/{rid}/events"

    first = await _until(
        http, path, lambda e: e.name == "status" and e.data["waiting_for"] == "approval"
    )
    before = _moments(first)
    assert [m["offset"] for m in before] == list(range(1, len(before) + 1))
    assert all(e.id == str(e.data["offset"]) for e in first if e.name == "moment")
    assert before[0]["v"] == 2 and before[0]["kind"] == "started"
    model_texts = [m["preview"] for m in before if m["kind"] == "model"]
    assert model_texts and all(model_texts), "model moments carry the reply's text"
    assert any("→ lookup_invoice({" in text for text in model_texts), model_texts
    status = next(e for e in first if e.name == "status").data
    assert status["run_id"] == rid and "status" in status

    # Disconnected while the run moves on; the reconnect names the last event it saw.
    await runs.decide(client, rid, DecideRequest(approve=True, by="alice"))
    last = [e for e in first if e.name == "moment"][-1].id
    assert before[-1]["kind"] == "approval requested"
    rest = await _until(http, path, lambda e: e.name == "end", last_event_id=last)
    after = _moments(rest)
    offsets = [m["offset"] for m in before + after]
    assert offsets == list(range(1, len(offsets) + 1)), offsets
    assert after[0]["kind"] == "approved" and after[-1]["kind"] == "completed"
    tool_texts = [m["preview"] for m in after if m["kind"] == "tool"]
    assert tool_texts and all(tool_texts)
    assert rest[-1].data == {"status": "completed"}

    # ?after=N does the same for a reader without the header.
    tail = await _until(http, f"{path}?after={offsets[-3]}", lambda e: e.name == "end")
    assert [m["offset"] for m in _moments(tail)] == offsets[-2:]


async def test_events_older_than_the_state_keeps_come_from_the_history(
    console: LiveConsole, dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state_records, "EVENTS_KEPT", 3)
    client = dev_env.client
    state = await waiting_payment(client, console.settings)
    assert len(state.events) == 3 and state.events[0].offset > 1
    await runs.decide(client, state.run_id, DecideRequest(approve=True, by="alice"))
    http, _ = await signed_in(console, "alice")
    seen = await _until(http, f"/runs/{state.run_id}/events", lambda e: e.name == "end")
    offsets = [m["offset"] for m in _moments(seen)]
    final = await runs.get_state(client, state.run_id)
    assert offsets == list(range(1, final.moment + 1))
    # The rebuilt model and tool moments name their transcript entry as a typed field of
    # the timeline (never read back from their text): each carries its preview.
    rebuilt = [
        m
        for m in _moments(seen)
        if m["offset"] < state.events[0].offset and m["kind"] in ("model", "tool")
    ]
    assert rebuilt and all(m["preview"] for m in rebuilt), rebuilt
    # A moment that writes no transcript entry (an approval asked, a step begun) has none.
    others = [
        m
        for m in _moments(seen)
        if m["offset"] < state.events[0].offset and m["kind"] not in ("model", "tool")
    ]
    assert others and not any(m["preview"] for m in others), others


async def test_the_events_query_refuses_bad_input(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    state = await waiting_payment(dev_env.client, console.settings)
    handle = runs.handle(dev_env.client, state.run_id)
    for bad in ({"after": -1}, {"after": "3"}, "3", {"after": True}):
        with pytest.raises(WorkflowQueryFailedError, match="events takes nothing or"):
            await handle.query("events", bad)
    assert (await runs.get_state(dev_env.client, state.run_id)).audit == state.audit


async def test_a_last_event_id_no_stream_gave_out_is_a_400_never_a_500(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    """ "²" is a digit to Python's str.isdigit, and int() refuses it: the header is read as
    ASCII digits only, and anything else is refused in one line before the stream opens."""
    state = await waiting_payment(dev_env.client, console.settings)
    http, _ = await signed_in(console, "alice")
    path = f"/runs/{state.run_id}/events"
    for bad in ("²", "1.²", "-1", "1.2.3", "abc", "9" * 40):
        sent = {b"Accept": b"text/event-stream", b"Last-Event-ID": bad.encode()}  # "²" too
        answer = await http.get(path, headers=sent)
        assert answer.status_code == 400, (bad, answer.status_code)
        assert "Last-Event-ID must be N or N.P" in answer.text
    async for first in events(http, path, last_event_id="1"):
        assert first.id is not None and int(first.id) > 1  # resumed after moment 1
        break
