"""Moments: the points where a run blocks (a model call, a tool call, a wait for a person)
or where a person changed it. At each one the workflow numbers the state and offers it
here. Normally nobody listens; when `agentctl history` replays a run's history through
the real workflow code, a recording listens and keeps every state: time travel rebuilt
from the history itself, not from snapshots kept on the side.

A recording keeps every moment's place and a glance at its state (status, step), and the
whole state of the moments asked for: all of them, or only those a `history --step K`
wants, since writing a long run's state out at each of its moments is most of what
rebuilding it costs.

This module is passed through the workflow sandbox, so a recording made outside it sees
what the workflow offers inside. Offering changes nothing the workflow does.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import Enum
from functools import cached_property
from itertools import compress, repeat
from operator import attrgetter, eq, not_
from typing import TYPE_CHECKING

from pydantic import BaseModel
from temporalio import workflow

if TYPE_CHECKING:
    from durable_agents.workflows.state import RunState


@dataclass(frozen=True)
class Moment:
    index: int
    at: datetime
    kind: str
    detail: str
    history_length: int  # events in the history when the moment's workflow task began
    run_id: str  # the Temporal run (of a continue-as-new chain) the moment belongs to
    # A glance at the state, kept at every moment: what a timeline lists.
    status: str
    current_step: int | None
    next_seq: int  # the transcript's next message then: an activity moment's reply is next_seq-1
    seq: int | None  # the transcript entry the moment writes (a reply, a tool's result), if any
    store_key: str  # the key of the run's transcript (workflows/state.py RunState.store_key)
    # The whole state, kept as JSON (made at Rust speed, parsed when asked for: a deep copy
    # at every moment made rebuilding a long run quadratic in Python); None where the
    # recording was not asked to keep it.
    state_json: str | None

    @cached_property
    def state(self) -> RunState:
        from durable_agents.workflows.state import RunState

        if self.state_json is None:
            raise LookupError(f"the state of step {self.index} was not kept by this rebuild")
        return RunState.model_validate_json(self.state_json)


# The lists of a state that grow with a run (a 500-step plan, the last 100 events) are
# most of what a long run's states come to; each item of them changes seldom.
LONG_LISTS = ("plan", "events")
_IMMUTABLE = (str, int, float, bool, type(None), datetime, date, Enum)
_FIELDS = attrgetter("__dict__")


@dataclass
class WrittenItems:
    """The JSON of the long lists' items already written, by object: an item is written
    again only when a field of it changed since, which a copy of its fields taken then
    tells. The copy is a true snapshot because each field it holds is immutable, which
    is checked on every write (else the caller writes the whole state). All but the
    writes runs at C speed: a 500-step run's 1,005 states cost what changed between
    them, not 1,005 times its plan."""

    fields: dict[int, dict[str, object]] = field(default_factory=dict)  # by id(item)
    texts: dict[int, str] = field(default_factory=dict)
    # The items written, held so that no other object takes one's id while it is cached.
    held: list[BaseModel] = field(default_factory=list)

    def of(self, items: Sequence[BaseModel]) -> list[str] | None:
        ids = list(map(id, items))
        # Compared before any is written: an item twice in the list is written for both.
        changed = list(map(not_, map(eq, map(_FIELDS, items), map(self.fields.get, ids))))
        texts: list[str] = list(map(self.texts.get, ids, repeat("")))
        for at in compress(range(len(ids)), changed):
            item = items[at]
            fields = dict(item.__dict__)
            if not all(isinstance(value, _IMMUTABLE) for value in fields.values()):
                return None
            if ids[at] not in self.fields:
                self.held.append(item)
            texts[at] = self.texts[ids[at]] = item.model_dump_json()
            self.fields[ids[at]] = fields
        return texts


@dataclass(frozen=True)
class _Recording:
    moments: dict[int, Moment]
    runs: frozenset[str] | None  # the Temporal runs being replayed (None: any)
    states: frozenset[int] | None  # the moments whose whole state is kept (None: all)
    written: WrittenItems = field(default_factory=WrittenItems)


def state_json(state: RunState, written: WrittenItems) -> str:
    """The state as JSON, the items of its long lists taken from `written` where they did
    not change; the whole state written afresh where an item holds a mutable value."""
    lists = []
    for name in LONG_LISTS:
        texts = written.of(getattr(state, name))
        if texts is None:
            return state.model_dump_json()
        lists.append(f'"{name}":[{",".join(texts)}]')
    rest = state.model_dump_json(exclude=set(LONG_LISTS))
    return f"{rest[:-1]},{','.join(lists)}}}"


# Process-wide, keyed by workflow id: a live worker in the same process never adds to one,
# as it records only while replaying, and only the runs being rebuilt. Several may record
# one workflow at once (two forks of one parent, a client and a worker in one process):
# each keeps its own, and any replay of that history offers the same moments to all.
_recordings: dict[str, list[_Recording]] = {}


def offer(state: RunState, kind: str, detail: str, seq: int | None = None) -> None:
    recordings = _recordings.get(workflow.info().workflow_id)
    if not recordings or not workflow.unsafe.is_replaying():
        return
    for recording in list(recordings):
        _keep(recording, state, kind, detail, seq)


def _keep(recording: _Recording, state: RunState, kind: str, detail: str, seq: int | None) -> None:
    if recording.runs is not None and workflow.info().run_id not in recording.runs:
        return
    if state.moment in recording.moments:
        return
    kept = recording.states is None or state.moment in recording.states
    recording.moments[state.moment] = Moment(
        index=state.moment,
        at=workflow.now(),
        kind=kind,
        detail=detail,
        history_length=workflow.info().get_current_history_length(),
        run_id=workflow.info().run_id,
        status=state.status.value,
        current_step=state.current_step,
        next_seq=state.next_seq,
        seq=seq,
        store_key=state.store_key,
        state_json=state_json(state, recording.written) if kept else None,
    )


@contextmanager
def recording(
    workflow_id: str, runs: Collection[str] | None = None, states: Collection[int] | None = None
) -> Iterator[dict[int, Moment]]:
    """Keep every moment the workflow offers while its history (of `runs`, the Temporal run
    ids of the chain being replayed) is replayed here, with the whole state of `states`
    (every moment's when None)."""
    moments: dict[int, Moment] = {}
    mine = _Recording(
        moments,
        frozenset(runs) if runs is not None else None,
        frozenset(states) if states is not None else None,
    )
    _recordings.setdefault(workflow_id, []).append(mine)
    try:
        yield moments
    finally:
        left = [other for other in _recordings.get(workflow_id, []) if other is not mine]
        if left:
            _recordings[workflow_id] = left
        else:
            _recordings.pop(workflow_id, None)
