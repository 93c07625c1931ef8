"""A record of the run's state: a small object over the state that owns some of its fields
(`OWNS`) and is the only code that writes them (`_set`). `RunState` refuses every other
assignment to a field, naming the field's record."""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar, cast

from pydantic import BaseModel

from durable_agents.workflows.state.fields import StateFields

T = TypeVar("T")


class StateWriteRefused(AttributeError):
    """A write to a field of the run's state from outside the record that owns it."""


class Record:
    """Made over one state on each use (`state.requests`): a copy never shares one."""

    OWNS: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, state: StateFields) -> None:
        self._s = state

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            if name not in self.OWNS:
                raise StateWriteRefused(f"{type(self).__name__} does not own the field {name!r}")
            BaseModel.__setattr__(self._s, name, value)


class Read(Generic[T]):
    """A field of its record that the record's holders read (`goal = Read[str]()` in Terms
    reads `state.goal`), never write. tests/workflows/test_state_records.py holds its type
    to the field's."""

    def __set_name__(self, record: type[Record], name: str) -> None:
        assert name in record.OWNS, f"{record.__name__} hands out only its own fields"
        self.name = name

    def __get__(self, record: Record, kind: type[Record]) -> T:
        return cast(T, getattr(record._s, self.name))

    def __set__(self, record: Record, value: T) -> None:
        raise StateWriteRefused(f"{self.name} is written by a transition of its record")
