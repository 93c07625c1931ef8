"""Each record's view (workflows/state_views.py) is that record's fields to read (its shape,
workflows/state_shape.py, from which its OWNS is derived too), with the record itself:
checked by mypy (the state is assigned to every view at once below) and here at run
time, name by name."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.state import RunState
from durable_agents.workflows.state_fields import RECORDS
from durable_agents.workflows.state_shape import StateShape, fields_of
from durable_agents.workflows.state_views import (
    VIEWS,
    AuditView,
    BudgetView,
    LifecycleView,
    MomentsView,
    OriginView,
    OutcomesView,
    RequestsView,
    SignaturesView,
    StepsView,
    TermsView,
    ThreadView,
    TranscriptView,
    names_of,
    records_of,
)


class EveryView(
    AuditView, BudgetView, LifecycleView, MomentsView, OriginView, OutcomesView, RequestsView,
    SignaturesView, StepsView, TermsView, ThreadView, TranscriptView, Protocol,
):  # fmt: skip
    """All twelve: RunState must be each of them (mypy checks the assignment below)."""


def test_the_state_is_every_view_of_its_records():
    state: EveryView = RunState.start("run-1", RunRequest(goal="g"), datetime.now(UTC))
    assert set(VIEWS) == set(RECORDS) and set(EveryView.__mro__) >= set(VIEWS.values())
    fields = set(RunState.model_fields)
    for record, view in VIEWS.items():
        names = names_of(view)
        # Its record's fields, every one and no other record's.
        assert names & fields == set(record.OWNS), view.__name__
        # Handed out by the state under one name, as that record.
        [accessor] = records_of(view)
        assert type(getattr(state, accessor)) is record
        for name in names - fields:  # the record, or a reading the state offers
            assert hasattr(state, name), (view.__name__, name)
    assert set().union(*(names_of(v) for v in VIEWS.values())) >= fields
    # The shapes the views compose are the state's fields, each once: every field of
    # RunState is in one record's shape, and the shape's type is the field's (mypy checks
    # the assignment above, property by property).
    shaped = [name for shape in StateShape.__bases__ for name in fields_of(shape)]
    assert sorted(shaped) == sorted(fields)
