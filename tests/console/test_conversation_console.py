"""A conversation in the console: the composer speaks as the signed-in user, the event
stream carries the live reply's pieces (`?deltas=1`), a reconnect resumes them where it
left off, and in a real Chromium a worker SIGKILLed mid-reply leaves the page showing the
retried reply alone, never both glued together."""

from __future__ import annotations

import asyncio
import signal
import urllib.request
import uuid
from pathlib import Path

from playwright.async_api import Browser, expect
from temporalio.testing import WorkflowEnvironment

from durable_agents.activities.stores import open_database
from durable_agents.activities.stream import DeltaStore
from durable_agents.control import conversations
from durable_agents.control.signer import kept_signer
from durable_agents.infra.stack import worker_polling
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.contracts import RunPolicy, TrustedKey
from tests.conftest import eventually, spawn_worker
from tests.console.live import LiveConsole, csrf_of, live_console, signed_in
from tests.console.sse import Event, events
from tests.console.test_console_browser import sign_in

LIVE = 60_000  # ms


async def open_chat(client, settings: Settings, label: str) -> str:
    cid = f"chat-{uuid.uuid4().hex[:8]}"
    request = conversations.conversation_request("support-chat", label=label)
    await conversations.open_conversation(client, settings, request, cid)
    return cid


async def _until(http, path: str, stop, last_event_id: str | None = None) -> list[Event]:
    seen: list[Event] = []
    async for event in events(http, path, last_event_id):
        seen.append(event)
        if stop(event):
            break
    return seen


async def test_the_composer_speaks_as_the_user_and_the_stream_carries_the_reply(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    client = dev_env.client
    cid = await open_chat(client, console.settings, "chat?chunk_ms=5")
    http, _ = await signed_in(console, "alice")
    page = await http.get(f"/runs/{cid}")
    assert page.status_code == 200 and 'action="/runs/' + cid + '/messages"' in page.text
    sent = await http.post(
        f"/runs/{cid}/messages",
        data={"csrf": csrf_of(page.text), "text": "Hello from the console", "by": "mallory"},
        headers={"Accept": "application/json"},
    )
    assert sent.status_code == 200, sent.text
    path = f"/runs/{cid}/events?deltas=1"
    # The reply's moment and its segment's end each come when the stream reads their log:
    # either may come first.
    ends: set[str] = set()

    def ended(e: Event) -> bool:
        if e.name == "moment" and e.data["kind"] == "replied":
            ends.add("moment")
        if e.name == "segment" and e.data["status"] == "done":
            ends.add("segment")
        return ends == {"moment", "segment"}

    seen = await _until(http, path, ended)
    pieces = [e for e in seen if e.name == "delta"]
    segments = [e.data for e in seen if e.name == "segment"]
    assert [s["status"] for s in segments] == ["open", "done"]
    assert "".join(p.data["text"] for p in pieces) == "You said: Hello from the console"
    assert len(pieces) >= 3 and all(p.data["v"] == 2 for p in pieces)
    # Ids are MOMENT.POS; positions rise one by one.
    positions = [int(str(e.id).split(".")[1]) for e in seen if e.name in ("delta", "segment")]
    assert positions == list(range(positions[0], positions[0] + len(positions)))
    # A reconnect from the middle of the reply gets exactly the rest of it.
    middle = pieces[1]
    rest = await _until(
        http, path, lambda e: e.name == "segment" and e.data["status"] == "done", middle.id
    )
    again = [e.data["text"] for e in rest if e.name == "delta"]
    assert again == [p.data["text"] for p in pieces[2:]]
    # The speaker is the signed-in user, whatever the form said.
    state = await conversations.thread(client, cid)
    assert [(t.by, t.message) for t in state.turns] == [("alice", "Hello from the console")]
    # A run that is no conversation takes no message.
    refused = await http.post(
        "/runs/nope-not-a-run/messages",
        data={"csrf": csrf_of(page.text), "text": "hi"},
        headers={"Accept": "application/json"},
    )
    assert refused.status_code in (404, 409)


def release(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(url, method="POST")).close()


async def test_a_reply_cut_by_a_sigkill_is_replaced_on_the_page_never_doubled(
    browser: Browser,
    dev_env: WorkflowEnvironment,
    settings: Settings,
    model_server,
    tmp_path: Path,
) -> None:
    client, hold = dev_env.client, uuid.uuid4().hex[:8]
    log = DeltaStore(open_database(settings))
    first = spawn_worker(settings, tmp_path / "worker1.log")
    try:
        await eventually(lambda: worker_polling(settings), within=30)
        cid = await open_chat(client, settings, f"chat?hold={hold}&chunk_ms=5")
        async with live_console(settings, client) as console:
            page = await sign_in(browser, console, "alice")
            await page.goto(f"/runs/{cid}")
            # The page counts the live bubbles it ever shows at once.
            await page.evaluate(
                """() => {
                  window.mostBubbles = 0;
                  const live = document.getElementById("live");
                  new MutationObserver(() => {
                    const shown = [...live.querySelectorAll("li .text")]
                      .filter(text => text.textContent !== "");
                    window.mostBubbles = Math.max(window.mostBubbles, shown.length);
                  }).observe(live, { childList: true, subtree: true, characterData: true });
                }"""
            )
            await page.get_by_label("Message as alice").fill("Is my parcel on its way?")
            await page.get_by_role("button", name="Send").click()
            bubble = page.locator("#live li.streaming")
            await expect(bubble).to_have_count(1, timeout=LIVE)
            await expect(bubble.locator(".text")).to_have_text("You", timeout=LIVE)
            cut = await bubble.get_attribute("data-segment")
            first.send_signal(signal.SIGKILL)
            await asyncio.to_thread(first.wait)
            second = spawn_worker(settings, tmp_path / "worker2.log")
            try:

                async def retried() -> bool:
                    return len({e.segment for e in log.read(cid) if e.kind == "delta"}) == 2

                await eventually(retried, within=90)
                await expect(page.locator(f'#live li[data-segment="{cut}"]')).to_have_count(
                    0, timeout=LIVE
                )
                await expect(page.locator("#live li.streaming")).to_have_count(1, timeout=LIVE)
                await asyncio.to_thread(release, f"{model_server.base_url}/scripted/holds/{hold}")
                reply = "You said: Is my parcel on its way?"
                await expect(page.locator("#thread")).to_contain_text(reply, timeout=LIVE)
                assert await page.evaluate("window.mostBubbles") == 1
                await expect(page.locator("#live li")).to_have_count(0, timeout=LIVE)
            finally:
                second.send_signal(signal.SIGTERM)
                await asyncio.to_thread(second.wait, 30)
    finally:
        if first.poll() is None:
            first.kill()


async def test_the_composer_signs_for_a_conversation_that_requires_signed_changes(
    console, dev_env
) -> None:
    from tests.console.live import csrf_of, signed_in

    client, settings = dev_env.client, console.settings
    console_key = kept_signer(settings.console_key_path, settings.console_key_id)
    policy = RunPolicy(
        require_signed_decisions=True,
        trusted_keys={settings.console_key_id: TrustedKey(public_key=console_key.public_key)},
    )
    cid = f"chat-{uuid.uuid4().hex[:8]}"
    request = conversations.conversation_request("support-chat", label="chat", policy=policy)
    await conversations.open_conversation(client, settings, request, cid)
    http, _ = await signed_in(console, "alice")
    page = await http.get(f"/runs/{cid}")
    sent = await http.post(
        f"/runs/{cid}/messages",
        data={"csrf": csrf_of(page.text), "text": "Hello"},
        headers={"Accept": "application/json"},
    )
    assert sent.status_code == 200, sent.text

    async def answered():
        view = await conversations.thread(client, cid)
        return view.turns if view.turns and view.turns[0].reply else None

    turns = await eventually(answered)
    assert [(t.by, t.message, t.reply) for t in turns] == [("alice", "Hello", "You said: Hello")]
