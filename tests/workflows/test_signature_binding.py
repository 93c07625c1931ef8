"""A v3 signature binds its decision or answer to the moment its signer saw: the moment is
part of what is signed (edit it and the signature is another's), and a v3 signature that
names no moment does not count (the binding cannot fail open). Judged on the run's state as
the handlers judge it, with runs built by tests/workflows/test_signature_doors.py."""

from __future__ import annotations

import pytest

from durable_agents.workflows.contracts import DelegatedBy
from durable_agents.workflows.people_inputs import FORWARDED, ON_REQUESTS
from durable_agents.workflows.signing import moment_tag, sign
from tests.conftest import arrange
from tests.workflows.test_signature_doors import CHANGE_SAYS, moments, new_case


@pytest.mark.parametrize("kind", ["approve", "reject", "answer"])
def test_a_v3_moment_edited_after_signing_breaks_the_signature(kind: str):
    """Signed at moment 5, the decision is edited to name moment 4, which the run holds
    too: were the moment outside the signed message, the copy would count at moment 4."""
    case = new_case(kind)
    assert case.signed.v == 3 and case.signed.moment == moment_tag(case.state.events[-1])
    assert case.verdict(case.signed) is None, "the honest input must count"
    other = moment_tag(case.state.events[3])  # moment 4: held, so only the signature tells
    edited = case.signed.model_copy(update={"moment": other})
    error = case.verdict(edited)
    assert error is not None and "forged signature" in error, error


@pytest.mark.parametrize("kind", ["approve", "reject", "answer"])
def test_a_v3_moment_edited_to_the_moment_after_a_rewind_does_not_count(kind: str):
    """Rewound past the signed moment and on again: the copy, edited to name the run's
    current moment, is refused as forged rather than counted in the new timeline."""
    case = new_case(kind)
    arrange(case.state, events=[*case.state.events[:3], *moments(4, 5, case.now)])
    assert "the run was rewound" in (case.verdict(case.signed) or "")
    edited = case.signed.model_copy(update={"moment": moment_tag(case.state.events[-1])})
    error = case.verdict(edited)
    assert error is not None and "forged signature" in error, error


@pytest.mark.parametrize("kind", ["approve", "reject", "answer"])
def test_a_v3_signature_that_names_no_moment_does_not_count(kind: str):
    """Signed v3 by the trusted key, honestly, over no moment: the run cannot tell which
    timeline it was meant for, so it refuses it (our signers sign such a one v2)."""
    case = new_case(kind)
    fields = case.signed.model_dump(exclude={"signature", "v", "moment"})
    unbound = sign(case.key, **fields, version=3, moment=None)
    error = case.verdict(unbound)
    assert error is not None and "names no moment" in error, error
    assert "\n" not in error


@pytest.mark.parametrize("kind", ["approve", "reject", "answer"])
def test_a_v2_decision_does_not_count_in_a_run_that_takes_v3(kind: str):
    """A v2 decision or answer names no moment: were it counted in a run that takes v3, a
    copy sent after a quick rewind would count again (within the clock skew)."""
    case = new_case(kind)
    unbound = case.resigned(v=2, moment=None)
    error = case.verdict(unbound)
    assert error is not None and "v2" in error and "\n" not in error, error


@pytest.mark.parametrize("kind", sorted(CHANGE_SAYS))
def test_a_change_signed_for_the_run_above_counts_only_where_it_is_passed_on(kind: str):
    """A sub-agent counts a change signed for a run above it only for what a parent passes
    on (pause, resume, a budget: the parent checked its signature and moment); any other
    change signed for the parent and sent straight to the child is refused."""
    case = new_case(kind)
    arrange(
        case.state,
        delegated_by=DelegatedBy(run_id="p", step=1, tool_call_id="c1", identities=["p@1"]),
    )
    for_the_parent = case.resigned(run="p@1")
    error = case.verdict(for_the_parent)
    if kind in PASSED_ON:
        assert error is None, error
    else:
        assert error is not None and "counts only there: sign it for this run" in error, error


# What a parent passes on to the sub-agent it waits on, as the product states it (written
# here, not read from FORWARDED: a kind added there would count, unchecked, in every child).
PASSED_ON = {"pause", "resume", "raise_budget"}


def test_what_a_parent_passes_on_is_pause_resume_and_a_budget():
    assert FORWARDED == PASSED_ON


@pytest.mark.parametrize("kind", sorted(ON_REQUESTS))
def test_a_decision_signed_for_the_run_above_does_not_count_in_a_sub_agent(kind: str):
    """A decision or answer is the run's own: one signed for its parent, even at the
    sub-agent's own moment, does not count in the sub-agent."""
    case = new_case(kind)
    arrange(
        case.state,
        delegated_by=DelegatedBy(run_id="p", step=1, tool_call_id="c1", identities=["p@1"]),
    )
    error = case.verdict(case.resigned(run="p@1"))
    assert error is not None and "\n" not in error, error
