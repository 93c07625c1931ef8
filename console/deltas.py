"""The live replies in the event stream (docs/events.md, version 2): with `?deltas=1`,
the run's `segment` and `delta` events from the live log (activities/stream.py) come
between its moments, each with an id `MOMENT.POS` (the last moment sent and the live
log's position), so a reconnect with Last-Event-ID resumes both where they were."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fastapi.sse import ServerSentEvent

from durable_agents.activities.stream import StreamEntry


@dataclass(frozen=True)
class Resume:
    """Where a reader resumes: after this moment, and after this live-log position."""

    moment: int = 0
    pos: int = 0

    def event_id(self, deltas: bool) -> str:
        return f"{self.moment}.{self.pos}" if deltas else str(self.moment)


# An event id of ours: `N` or `N.P`, ASCII digits only ("²" is a digit to str.isdigit).
EVENT_ID = re.compile(r"([0-9]{1,15})(?:\.([0-9]{1,15}))?")


class BadEventId(ValueError):
    """A Last-Event-ID no stream of ours gave out."""


def resume_from(header: str | None, after: int | None, pos: int | None) -> Resume:
    """The Last-Event-ID header (a reconnect: `N` or `N.P`), else ?after=N&pos=P; any other
    header is refused (BadEventId), never guessed at."""
    if header is not None and header.strip():
        found = EVENT_ID.fullmatch(header.strip())
        if found is None:
            raise BadEventId("Last-Event-ID must be N or N.P, in whole numbers")
        return Resume(int(found[1]), int(found[2] or 0))
    return Resume(after or 0, pos or 0)


def live_events(
    run_id: str, entries: list[StreamEntry], moment: int, version: int
) -> list[ServerSentEvent]:
    """A `segment` event when a reply's segment opens, ends or is abandoned (a reader then
    drops its text: a retried attempt's reply replaces it), a `delta` for each piece."""
    out = []
    for entry in entries:
        data: dict[str, Any] = {"v": version, "run_id": run_id, "pos": entry.pos}
        data |= entry.as_event()
        name = "delta" if entry.kind == "delta" else "segment"
        out.append(ServerSentEvent(id=f"{moment}.{entry.pos}", event=name, data=data))
    return out
