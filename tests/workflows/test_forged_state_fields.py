"""Every field of the run's state, against a forged fork and a forged continuation: a carried
state that differs from the record in any one field, whichever, is told apart. A fork's
carried state is compared with its parent's rebuilt record field by field
(`first_difference`, in the state's own order); a continuation's carried input must be
the very input the previous run continued with (`run_origin` compares the payloads), so
a state differing anywhere packs to another input. The fields come from the model: a
field added is a field tested."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime

import pytest

from durable_agents.workflows.beginnings.fork import first_difference
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.packing import pack_state
from durable_agents.workflows.state import RunState

RECORD = RunState.start("victim", RunRequest(goal="pay", label="pay-invoice"), datetime.now(UTC))


def forged(name: str) -> RunState:
    """The record with one field replaced by something it never held (unvalidated: an
    attacker's JSON need not be a state our code would make)."""
    return RECORD.model_copy(update={name: ["forged", name]})


@pytest.mark.parametrize("name", list(RunState.model_fields))
def test_a_fork_carrying_a_forged_field_is_told_apart(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # serializing a value of the wrong type
        assert first_difference(RECORD, forged(name)) == name


@pytest.mark.parametrize("name", list(RunState.model_fields))
def test_a_continuation_carrying_a_forged_field_is_another_input(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert pack_state(forged(name)) != pack_state(RECORD)
