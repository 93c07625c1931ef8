"""How the run's state is written: only by the record that owns a field.

`RunState` (workflows/state_fields.py) refuses every assignment to its fields; a record
(workflows/state_*.py) writes its own through `write`, which refuses a field the record
does not own. So a transition lives with its fields, by construction: a part that sets
`state.status = ...` fails the first time it runs, and tests/workflows/test_state_records.py
finds in-place changes (`state.plan.append`) outside a field's record.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from pydantic import BaseModel


class StateWriteRefused(AttributeError):
    """A write to a field of the run's state from outside the record that owns it."""


class StateRecord(Protocol):
    """What every record of the run's state has: the fields it owns."""

    OWNS: ClassVar[frozenset[str]]


def write(state: object, record: StateRecord, **values: Any) -> None:
    """Set fields of `state` (a RunState) that `record` owns (and only those)."""
    assert isinstance(state, BaseModel), type(state)
    for name, value in values.items():
        if name not in record.OWNS:
            raise StateWriteRefused(f"{type(record).__name__} does not own the field {name!r}")
        BaseModel.__setattr__(state, name, value)
