"""The live stream is cheap and loses nothing: a run page is served with the moments it
shows and subscribes after the last of them; a stream opens the stores once; one person's
open streams are capped; an event whose text cannot be read is still sent, marked."""

from __future__ import annotations

import asyncio
import re
from contextlib import AsyncExitStack

from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from durable_agents.activities.sql import SqliteDatabase
from durable_agents.activities.transcript import TranscriptStore
from durable_agents.console import events, users
from durable_agents.console.app import create_app
from durable_agents.console.serving import serving
from durable_agents.control import runs, stored
from durable_agents.runtime.encryption import Keyring, new_key
from durable_agents.workflows.people_inputs import Decision
from durable_agents.workflows.records import RunEvent, RunStatus
from tests.conftest import eventually
from tests.console.live import PASSWORDS, LiveConsole, signed_in
from tests.console.runs_for_console import waiting_payment


async def test_the_page_shows_its_moments_and_streams_only_what_comes_after(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    state = await waiting_payment(dev_env.client, console.settings)
    http, _ = await signed_in(console, "alice")
    page = (await http.get(f"/runs/{state.run_id}")).text
    after = int(re.search(r'data-after="(\d+)"', page).group(1))  # type: ignore[union-attr]
    offsets = [int(n) for n in re.findall(r'<li data-offset="(\d+)"', page)]
    assert after == state.moment and offsets == list(range(1, after + 1)), (after, offsets)
    assert "approval requested" in page

    await runs.approve(dev_env.client, state.run_id, Decision(by="alice"))
    sent: list[int] = []
    async with http.stream("GET", f"/runs/{state.run_id}/events?after={after}") as stream:
        async for line in stream.aiter_lines():
            if line.startswith("id:"):
                sent.append(int(line[3:]))
            if line.startswith("event: end"):
                break
    assert sent and min(sent) == after + 1  # nothing the page already shows
    final = await runs.get_state(dev_env.client, state.run_id)
    assert final.status is RunStatus.COMPLETED and sent[-1] == final.moment


async def test_a_stream_opens_the_transcript_store_once(
    console: LiveConsole, dev_env: WorkflowEnvironment, monkeypatch
) -> None:
    state = await waiting_payment(dev_env.client, console.settings)
    opened: list[str] = []
    real = stored.transcript_store

    def counting(settings):
        opened.append("open")
        return real(settings)

    monkeypatch.setattr(events, "transcript_store", counting)
    reader = events.EventReader(dev_env.client, console.settings, state.run_id, 0)
    batch, _ = await reader.next_batch()
    with_text = [item for item in batch if item["preview"]]
    assert len(with_text) >= 2 and len(opened) == 1, (len(with_text), opened)


async def test_open_streams_per_person_are_capped(
    dev_env: WorkflowEnvironment, settings, worker
) -> None:
    capped = settings.model_copy(update={"console_streams_per_user": 2})
    for name, password in PASSWORDS.items():
        users.add_user(capped.console_users_path, name, password)
    app = create_app(capped, dev_env.client)
    streams = app.state.console.streams
    async with serving(app) as url:
        console = LiveConsole(url, capped)
        state = await waiting_payment(dev_env.client, capped)
        http, _ = await signed_in(console, "bob")
        events_url = f"/runs/{state.run_id}/events"
        async with AsyncExitStack() as held:
            await reading(held, http, events_url)  # a real stream holds a slot
            assert streams.open == {"bob": 1}
            held.enter_context(streams.held_by("bob"))  # and a second one
            third = await http.get(events_url, headers={"Accept": "application/json"})
            assert third.status_code == 429
            assert "bob has 2 live streams open already" in third.json()["message"]
            other, _ = await signed_in(console, "alice")  # another person is not refused
            await reading(held, other, events_url)
            assert streams.open == {"bob": 2, "alice": 1}
            held.push_async_callback(other.aclose)

        # Closed, a stream gives its slot back once the server sees its reader gone.
        async def released() -> bool:
            return not streams.open

        await eventually(released, within=20)


KEPT: list[object] = []


async def reading(stack: AsyncExitStack, http, url: str) -> None:
    """Open a stream and wait for its first line (within 10 s), kept open by `stack` (and
    its line reader kept too: a reader let go closes the stream it reads)."""
    response = await stack.enter_async_context(http.stream("GET", url))
    assert response.status_code == 200, response.status_code
    lines = response.aiter_lines()
    KEPT.append(lines)
    stack.callback(KEPT.remove, lines)
    first = await asyncio.wait_for(anext(lines), 10)
    assert first.startswith(("event:", "id:", "data:", ":")), first


async def test_an_event_whose_text_cannot_be_read_is_sent_marked(settings, tmp_path) -> None:
    worker_keys, console_keys = f"k1={new_key()}", f"k2={new_key()}"
    store = TranscriptStore(SqliteDatabase(settings.database_path), Keyring.parse(worker_keys))
    store.put("run-x@1", 3, {"role": "assistant", "content": "sealed with k1"})
    lacking = settings.model_copy(update={"encryption_keys": SecretStr(console_keys)})
    text, readable = await events.Previews(lacking).of("run-x@1", 3)
    assert not readable and text.startswith("(text not readable here")
    event = RunEvent(offset=7, at=store_time(), kind="model", status=RunStatus.RUNNING, seq=3)
    item = events.wire("run-x", event, text, readable)
    assert item["preview_unreadable"] is True and item["offset"] == 7
    same, ok = await events.Previews(
        settings.model_copy(update={"encryption_keys": SecretStr(worker_keys)})
    ).of("run-x@1", 3)
    assert ok and same == "sealed with k1"


def store_time():
    from datetime import UTC, datetime

    return datetime.now(UTC)
