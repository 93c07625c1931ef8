"""Read a Server-Sent Events stream over real HTTP, as a browser's EventSource would."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class Event:
    name: str
    id: str | None
    data: dict[str, Any]


async def events(
    http: httpx.AsyncClient, path: str, last_event_id: str | None = None
) -> AsyncIterator[Event]:
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    async with http.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        name: str = "message"
        event_id: str | None = None
        data: list[str] = []
        async for line in response.aiter_lines():
            if line == "":
                if data:
                    yield Event(name, event_id, json.loads("\n".join(data)))
                name, event_id, data = "message", None, []
            elif line.startswith(":"):
                continue
            else:
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "event":
                    name = value
                elif field == "id":
                    event_id = value
                elif field == "data":
                    data.append(value)
