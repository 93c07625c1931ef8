"""What a record of the run's state is: a small object over the state that owns some of
its fields (`OWNS`) and is the only code that writes them (`_set`). `RunState` refuses
every other assignment to a field, naming the field's record."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel

from durable_agents.workflows.state.fields import StateFields


class StateWriteRefused(AttributeError):
    """A write to a field of the run's state from outside the record that owns it."""


class Record:
    """A record: made over one state (`state.requests` makes one on each use)."""

    OWNS: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, state: StateFields) -> None:
        self._s = state

    def _set(self, **values: Any) -> None:
        """Set fields this record owns (and only those)."""
        for name, value in values.items():
            if name not in self.OWNS:
                raise StateWriteRefused(f"{type(self).__name__} does not own the field {name!r}")
            BaseModel.__setattr__(self._s, name, value)
