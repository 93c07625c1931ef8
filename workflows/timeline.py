"""Moments: the points where a run blocks (a model call, a tool call, a wait for a person)
or where a person changed it. At each one the workflow numbers the state and offers it
here. Normally nobody listens; when `agentctl history` replays a run's history through
the real workflow code, a recording listens and keeps every state: time travel rebuilt
from the history itself, not from snapshots kept on the side.

This module is passed through the workflow sandbox, so a recording made outside it sees
what the workflow offers inside. Offering changes nothing the workflow does.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING

from temporalio import workflow

if TYPE_CHECKING:
    from workflows.state import RunState


@dataclass(frozen=True)
class Moment:
    index: int
    at: datetime
    kind: str
    detail: str
    history_length: int  # events in the history when the moment's workflow task began
    run_id: str  # the Temporal run (of a continue-as-new chain) the moment belongs to
    # Kept as JSON, made at Rust speed, and parsed when asked for: a deep copy at every
    # moment made rebuilding a long run quadratic in Python.
    state_json: str

    @cached_property
    def state(self) -> RunState:
        from workflows.state import RunState

        return RunState.model_validate_json(self.state_json)


@dataclass(frozen=True)
class _Recording:
    moments: dict[int, Moment]
    runs: frozenset[str] | None  # the Temporal runs being replayed (None: any)


# Process-wide, keyed by workflow id: a live worker in the same process never adds to one,
# as it records only while replaying, and only the runs being rebuilt.
_recordings: dict[str, _Recording] = {}


def offer(state: RunState, kind: str, detail: str) -> None:
    recording = _recordings.get(workflow.info().workflow_id)
    if recording is None or not workflow.unsafe.is_replaying():
        return
    if recording.runs is not None and workflow.info().run_id not in recording.runs:
        return
    if state.moment in recording.moments:
        return
    recording.moments[state.moment] = Moment(
        index=state.moment,
        at=workflow.now(),
        kind=kind,
        detail=detail,
        history_length=workflow.info().get_current_history_length(),
        run_id=workflow.info().run_id,
        state_json=state.model_dump_json(),
    )


@contextmanager
def recording(workflow_id: str, runs: Collection[str] | None = None) -> Iterator[dict[int, Moment]]:
    """Keep every moment the workflow offers while its history (of `runs`, the Temporal run
    ids of the chain being replayed) is replayed here."""
    moments: dict[int, Moment] = {}
    _recordings[workflow_id] = _Recording(moments, frozenset(runs) if runs is not None else None)
    try:
        yield moments
    finally:
        _recordings.pop(workflow_id, None)
