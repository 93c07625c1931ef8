"""Event kinds are said once (workflows/event_kinds.py): the docs list every one, and
what a moment publishes is chosen among them."""

from __future__ import annotations

import re
from pathlib import Path

from durable_agents.workflows.event_kinds import PUBLISHED_AT, EventKind

EVENTS_DOC = Path(__file__).parents[2] / "docs" / "events.md"


def documented_kinds() -> set[str]:
    [row] = [line for line in EVENTS_DOC.read_text().splitlines() if line.startswith("| `kind`")]
    return set(re.findall(r"`([^`]+)`", row.split("|")[2]))


def test_docs_events_lists_every_kind_and_no_other():
    assert documented_kinds() == {kind.value for kind in EventKind}


def test_what_publishes_is_a_set_of_event_kinds():
    assert PUBLISHED_AT.issubset(EventKind)
    assert all(isinstance(kind, EventKind) for kind in PUBLISHED_AT)
