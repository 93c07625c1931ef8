"""A parent hands a sub-agent its policy narrowed to the sub-agent's own floor
(workflows/policy.py `narrowed`): the child then finds nothing in it that loosens its
floor (`loosening`, the one rule every beginning meets), and the parent's own tighter
rules are kept. Checked over every pair of a grid of policies, each rule varied."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest

from durable_agents.workflows.contracts import RunPolicy, TrustedKey
from durable_agents.workflows.policy import loosening, narrowed

KEY_A = TrustedKey(public_key="A" * 43 + "=")
KEY_B = TrustedKey(public_key="B" * 43 + "=")

VARIANTS: list[dict[str, object]] = [
    {},
    {"approve_all_side_effects": True},
    {"approve_payments_above": Decimal("50")},
    {"approve_payments_above": Decimal("10")},
    {"approve_everything_after_spend_usd": 1.0},
    {"approvers": {"issue_refund": ["alice"]}},
    {"approvers": {"issue_refund": ["alice", "bob"]}},
    {"on_timeout": "escalate"},
    {"on_timeout": "escalate", "escalate_to": ["bob"]},
    {"on_timeout": "escalate", "escalate_to": ["carol"], "approvers": {"issue_refund": ["alice"]}},
    {"on_timeout": "escalate", "approvers": {"issue_refund": ["alice"]}},
    {"require_signed_decisions": True, "trusted_keys": {"a": KEY_A}},
    {"trusted_keys": {"b": KEY_B}},
    {"decision_timeout_seconds": 60.0},
]
POLICIES = [RunPolicy.model_validate(v) for v in VARIANTS]
PAIRS = list(itertools.product(range(len(POLICIES)), repeat=2))


@pytest.mark.parametrize(("floor", "handed"), PAIRS, ids=[f"{f}-{h}" for f, h in PAIRS])
def test_a_narrowed_policy_never_loosens_the_floor(floor: int, handed: int) -> None:
    made = narrowed(POLICIES[floor], POLICIES[handed])
    assert loosening(made, POLICIES[floor]) is None, (VARIANTS[floor], VARIANTS[handed], made)


def test_the_parents_tighter_rules_are_kept() -> None:
    parent = RunPolicy(approve_payments_above=Decimal("10"), approve_all_side_effects=True)
    child_floor = RunPolicy(approve_payments_above=Decimal("50"))
    made = narrowed(child_floor, parent)
    assert made.approve_payments_above == Decimal("10") and made.approve_all_side_effects


def test_escalating_to_someone_the_agents_approvers_do_not_include_loosens() -> None:
    """Where the agent escalates to nobody in particular, each tool's approvers decide
    after the escalation: a request naming someone else to decide then loosens it."""
    floor = RunPolicy(on_timeout="escalate", approvers={"issue_refund": ["alice"]})
    asked = RunPolicy(on_timeout="escalate", escalate_to=["mallory"])
    assert loosening(asked, floor) == (
        "the requested policy loosens the agent's: escalate_to must be among the approvers "
        "of issue_refund: ['alice']"
    )
    assert loosening(RunPolicy(on_timeout="escalate"), floor) is None
    assert narrowed(floor, asked).escalate_to == []
