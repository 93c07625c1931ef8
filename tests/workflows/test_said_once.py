"""What must agree is said once: one enum derived from the other."""

from __future__ import annotations

import pytest

from durable_agents.workflows.event_kinds import EventKind
from durable_agents.workflows.records import ApprovalStatus


def test_a_decided_status_is_named_as_its_moment():
    # ApprovalStatus's decided members are defined from EventKind: they cannot drift.
    decided = [status for status in ApprovalStatus if status is not ApprovalStatus.PENDING]
    assert {status.moment for status in decided} == {EventKind.APPROVED, EventKind.REJECTED}
    assert all(status.moment.value == status.value for status in decided)
    with pytest.raises(ValueError, match="not decided"):
        _ = ApprovalStatus.PENDING.moment
