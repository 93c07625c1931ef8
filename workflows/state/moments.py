"""Moments: the run's numbered points (workflows/timeline.py), the latest kept for the
event protocol."""

from __future__ import annotations

from datetime import datetime

from durable_agents.workflows.records import EVENTS_KEPT, RunEvent
from durable_agents.workflows.state.record import Read, Record


class Moments(Record):
    OWNS = frozenset({"moment", "events"})
    moment = Read[int]()
    events = Read[list[RunEvent]]()

    def reach(self, kind: str, detail: str, now: datetime, seq: int | None) -> None:
        s = self._s
        event = RunEvent(
            offset=s.moment + 1,
            at=now,
            kind=kind,
            detail=detail,
            status=s.status,
            step=s.current_step,
            seq=seq,
        )
        self._set(moment=s.moment + 1, events=[*s.events[-(EVENTS_KEPT - 1) :], event])

    def rewind_error(self, moment: int) -> str | None:
        if moment > self._s.moment:
            return f"the run has no moment {moment} yet (it is at {self._s.moment})"
        return None

    def forked(self) -> None:
        """A fork's events are its own (its moments go on from the parent's number)."""
        self._set(events=[])
