"""The run event protocol, version 2 (docs/events.md): a run's moments as offset-addressed
JSON, served as Server-Sent Events; with `?deltas=1`, the live replies' pieces too
(console/deltas.py).

Each moment of a run is one event whose offset is the moment's number: it never repeats
within a run's chain, so a reader that reconnects with Last-Event-ID N gets exactly the
events after N. Events come from the run's `events` query, which reads the latest moments
kept in its state and costs the history nothing; a reader further behind than the state
keeps gets the missing ones rebuilt from the history (control/timeline.py).

A model or tool moment is sent once it is over (a later moment exists, or the run is
closed), with a preview of what it wrote to the transcript, so no event is sent twice to
add its result. Between moments the stream sends `status` events (no id): the run's
summary whenever it changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from fastapi.sse import ServerSentEvent
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.transcript import TranscriptStore
from durable_agents.console.deltas import Resume, live_events
from durable_agents.control import timeline
from durable_agents.control.live import LiveReplies
from durable_agents.control.runs import RunError, handle
from durable_agents.control.stored import transcript_store
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.records import RunEvent, RunStatus
from durable_agents.workflows.run_summary import EventPage
from durable_agents.workflows.run_summary import event_page as page_of
from durable_agents.workflows.state import RunState

# 2: `delta` and `segment` events, asked for with ?deltas=1; otherwise as version 1.
PROTOCOL_VERSION = 2
PREVIEW_CHARS = 400
# How often a stream asks the run for news: the click-to-update delay is about this.
POLL_SECONDS = 0.2
ACTIVITY_KINDS = ("model", "tool")


async def event_page(client: Client, run_id: str, after: int) -> EventPage:
    page: EventPage = await handle(client, run_id).query(
        "events", {"after": after}, result_type=EventPage
    )
    return page


def is_over(event: RunEvent, page: EventPage) -> bool:
    """Whether an event is final: its activity ended (a later moment) or the run closed."""
    if event.kind not in ACTIVITY_KINDS:
        return True
    return event.offset < page.summary.moment or page.summary.status.is_closed


def message_preview(message: dict[str, Any] | None) -> str:
    """A model reply's or a tool result's text, short: what a person reads in the timeline."""
    if message is None:
        return ""
    parts = [str(message.get("content") or "")]
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        # Our own form ({name, arguments}), or the wire form nested under "function".
        nested = call.get("function")
        function: dict[str, Any] = nested if isinstance(nested, dict) else call
        parts.append(f"→ {function.get('name', '?')}({function.get('arguments', '')})")
    return preview(" ".join(p for p in parts if p), PREVIEW_CHARS)


class Previews:
    """Transcript texts for events, read from our store as this process reaches it; the
    store is opened once, at the first text a reader needs."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._store: TranscriptStore | None = None

    async def of(self, store_key: str, seq: int | None) -> tuple[str, bool]:
        """The text, and whether it could be read: an event whose text cannot be read
        (the store unreachable, a key this console lacks) is still sent, marked."""
        if seq is None:
            return "", True
        try:
            if self._store is None:
                self._store = await asyncio.to_thread(transcript_store, self.settings)
            message = await asyncio.to_thread(self._store.read_one, store_key, seq)
        except RunError as err:
            return f"(text not readable here: {err})", False
        except Exception as err:  # a row sealed with a key we lack, a database error
            return f"(text not readable here: {one_line(err)})", False
        return message_preview(message), True


def wire(run_id: str, event: RunEvent, text: str, readable: bool = True) -> dict[str, Any]:
    item = {
        "v": PROTOCOL_VERSION,
        "run_id": run_id,
        "offset": event.offset,
        "at": event.at.isoformat(),
        "kind": event.kind,
        "detail": event.detail,
        "status": event.status.value,
        "step": event.step,
        "preview": text,
    }
    if not readable:
        item["preview_unreadable"] = True
    return item


def status_wire(page: EventPage) -> dict[str, Any]:
    summary = page.summary
    return {
        "v": PROTOCOL_VERSION,
        "run_id": summary.run_id,
        "status": summary.status.value,
        "moment": summary.moment,
        "progress": summary.progress,
        "step": summary.current_step,
        "steps_done": summary.steps_done,
        "steps_total": summary.steps_total,
        "waiting_for": summary.waiting_for,
        "cost_usd": summary.usage.cost_usd,
        "tokens": summary.usage.input_tokens + summary.usage.output_tokens,
        "pending": [a.request_id for a in summary.pending_approvals]
        + [q.question_id for q in summary.pending_questions],
    }


async def from_history(client: Client, run_id: str, after: int, before: int) -> list[RunEvent]:
    """Events after `after` and before `before`, rebuilt by replaying the run's history:
    for a reader further behind than the state keeps."""
    found = await timeline.rebuild(client, run_id, states=False)
    events = []
    for moment in found.moments:
        if after < moment.index < before:
            events.append(
                RunEvent(
                    offset=moment.index,
                    at=moment.at,
                    kind=moment.kind,
                    detail=moment.detail,
                    status=RunStatus(moment.status),
                    step=moment.current_step,
                    seq=moment.seq,
                )
            )
    return events


class EventReader:
    """A run's events after an offset, each once, in order, with previews."""

    def __init__(self, client: Client, settings: Settings, run_id: str, after: int) -> None:
        self.client, self.run_id, self.after = client, run_id, after
        self.previews = Previews(settings)

    async def next_batch(self) -> tuple[list[dict[str, Any]], EventPage]:
        page = await event_page(self.client, self.run_id, self.after)
        ready: list[RunEvent] = []
        for event in page.events:  # in order: stop at the first one not over yet
            if not is_over(event, page):
                break
            ready.append(event)
        if page.first_kept is not None and self.after < page.first_kept - 1:
            ready = (
                await from_history(self.client, self.run_id, self.after, page.first_kept) + ready
            )
        out = []
        for event in ready:
            text, readable = await self.previews.of(page.store_key, event.seq)
            out.append(wire(self.run_id, event, text, readable))
            self.after = event.offset
        return out, page


async def rendered_moments(state: RunState, previews: Previews) -> tuple[list[dict[str, Any]], int]:
    """The moments a run page shows as it is served (those the state keeps and that are
    over), and the offset its live stream starts after: the page never asks for what it
    already shows, and a long run's page costs no replay of its history."""
    page = page_of(state, 0)
    shown = []
    for event in page.events:
        if not is_over(event, page):
            break
        text, readable = await previews.of(page.store_key, event.seq)
        shown.append(wire(state.run_id, event, text, readable))
    after = shown[-1]["offset"] if shown else (page.first_kept or 1) - 1
    return shown, after


async def stream(
    client: Client,
    settings: Settings,
    run_id: str,
    resume: Resume,
    deltas: bool = False,
) -> AsyncIterator[ServerSentEvent]:
    """The SSE stream: `moment` events with ids, `status` events when the summary changes,
    with `deltas` the live replies' `segment` and `delta` events, and `end` once the run
    is closed and every moment was sent."""
    reader = EventReader(client, settings, run_id, resume.moment)
    live = LiveReplies.reachable(settings) if deltas else None
    pos = resume.pos
    last_status: dict[str, Any] | None = None
    try:
        while True:
            try:
                batch, page = await reader.next_batch()
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:  # deleted while watched
                    yield ServerSentEvent(event="end", data={"status": "gone"})
                    return
                yield ServerSentEvent(
                    event="unavailable", data={"error": one_line(err)}, retry=2000
                )
                await asyncio.sleep(2)
                continue
            except Exception as err:  # told to the page, then retried: a worker may come back
                yield ServerSentEvent(
                    event="unavailable", data={"error": one_line(err)}, retry=2000
                )
                await asyncio.sleep(2)
                continue
            for item in batch:
                ident = Resume(item["offset"], pos).event_id(deltas)
                yield ServerSentEvent(id=ident, event="moment", data=item)
            status = status_wire(page)
            if status != last_status:
                last_status = status
                yield ServerSentEvent(event="status", data=status)
            closed = page.summary.status.is_closed and page.summary.moment <= reader.after
            if live is None:
                if closed:
                    yield ServerSentEvent(event="end", data={"status": page.summary.status.value})
                    return
                await asyncio.sleep(POLL_SECONDS)
                continue
            # The live log is read until the next poll is due: a piece is sent as it lands.
            entries = await live.after(run_id, pos, wait=0 if closed else POLL_SECONDS)
            for event in live_events(run_id, entries, reader.after, PROTOCOL_VERSION):
                yield event
            pos = entries[-1].pos if entries else pos
            if closed and not entries:
                yield ServerSentEvent(event="end", data={"status": page.summary.status.value})
                return
    finally:
        if live is not None:
            await live.close()


def one_line(err: BaseException) -> str:
    text = getattr(err, "message", None) or str(err) or type(err).__name__
    return " ".join(str(text).split())[:300]
