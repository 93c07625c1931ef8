"""Moments, a record of the run's state: its numbered points (workflows/timeline.py) and
the latest ones kept for the event protocol (at most EVENTS_KEPT)."""

from __future__ import annotations

from datetime import datetime

from durable_agents.workflows.records import EVENTS_KEPT, RunEvent
from durable_agents.workflows.state.record import Record


class Moments(Record):
    OWNS = frozenset({"moment", "events"})

    @property
    def moment(self) -> int:
        return self._s.moment

    @property
    def events(self) -> list[RunEvent]:
        return self._s.events

    def reach(self, kind: str, detail: str, now: datetime, seq: int | None) -> None:
        """The next moment, kept for the event protocol."""
        moment = self._s.moment + 1
        event = RunEvent(
            offset=moment,
            at=now,
            kind=kind,
            detail=detail,
            status=self._s.status,
            step=self._s.current_step,
            seq=seq,
        )
        self._set(moment=moment, events=[*self._s.events[-(EVENTS_KEPT - 1) :], event])

    def rewind_error(self, moment: int) -> str | None:
        if moment > self._s.moment:
            return f"the run has no moment {moment} yet (it is at {self._s.moment})"
        return None

    def forked(self) -> None:
        """A fork's events are its own (its moments go on from the parent's number)."""
        self._set(events=[])
