"""Signed changes across a run and its sub-agent: a person's raise or pause signed at the
parent is forwarded as signed, and the child verifies it too; nothing sent to the child
directly, unsigned or inflated, lifts its budget. Time-skipping server, scripted model."""

from __future__ import annotations

import pytest

from durable_agents import RunBudget, RunPolicy
from durable_agents.control import runs
from durable_agents.control.runs import RunError
from durable_agents.control.signer import Signer
from durable_agents.testing import AgentTestbed
from durable_agents.workflows.contracts import TrustedKey
from durable_agents.workflows.people_inputs import Actor, BudgetRaise
from durable_agents.workflows.records import BUDGET_REQUEST
from durable_agents.workflows.signing import new_key
from durable_agents.workflows.state import RunState
from tests.conftest import eventually
from tests.delegation.agents import model_with_a_report, triage
from tests.delegation.test_budget import budget_request


def signed_policy() -> tuple[RunPolicy, Signer]:
    key, public = new_key()
    policy = RunPolicy(
        approvers={BUDGET_REQUEST: ["cfo", "ops"]},
        require_signed_decisions=True,
        trusted_keys={"cfo-laptop": TrustedKey(public_key=public, signs_for=["cfo"])},
    )
    return policy, Signer(key, "cfo-laptop")


def refusals(state: RunState) -> list[str]:
    return [e.detail for e in state.audit if e.action == "decision_refused"]


async def test_a_signed_raise_reaches_the_child_and_nothing_unsigned_lifts_it(own_clock):
    policy, cfo = signed_policy()
    async with AgentTestbed(triage, model=model_with_a_report(), env=own_clock) as bed:
        client = bed.client.temporal
        run = await bed.start("triage", "Ticket 12", budget=RunBudget(tool_calls=2), policy=policy)
        [delegation] = (await eventually(lambda: _delegated(run))).delegations
        child = bed.client.run(delegation.child_id)
        await budget_request(child)
        parent_identity = (await run.state()).store_key

        # Unsigned at the parent: refused and recorded, the budget as it was.
        with pytest.raises(RunError, match="unsigned raise_budget by 'cfo'"):
            await runs.raise_budget(client, run.run_id, BudgetRaise(by="cfo", tool_calls=9))
        # Sent to the child directly: unsigned, then a signed raise forwarded with a share
        # larger than what was signed.
        handle = client.get_workflow_handle(child.run_id)
        await handle.signal("budget", BudgetRaise(by="cfo", tool_calls=9))
        signed = cfo.change(parent_identity, "cfo", "raise_budget", {"limits": {"tool_calls": 3},
                                                                     "comment": ""})  # fmt: skip
        original = BudgetRaise(by="cfo", tool_calls=3, signed=signed)
        inflated = BudgetRaise(by="cfo", tool_calls=9, forwarded=original)
        await handle.signal("budget", inflated)
        renamed = BudgetRaise(by="ops", tool_calls=1, forwarded=original)
        await handle.signal("budget", renamed)
        child_refused = await eventually(lambda: _refused(child, 3))
        assert (await child.state()).budget == RunBudget(tool_calls=1)
        assert "unsigned raise_budget" in child_refused[0]
        assert "passes what was raised" in child_refused[1]
        assert "forwarded as 'ops'" in child_refused[2]

        # Signed at the parent: counted there, forwarded as signed, counted in the child.
        await runs.raise_budget(client, run.run_id, BudgetRaise(by="cfo", tool_calls=5), cfo)
        result = await run.result()
        parent, child_after = await run.state(), await child.state()
    assert result.status == "completed"
    assert parent.budget is not None and parent.budget.tool_calls == 5
    assert child_after.budget is not None and child_after.budget.tool_calls == 4
    assert len(refusals(parent)) == 1 and len(refusals(child_after)) == 3
    assert any(e.action == "budget_raised" and e.actor == "cfo" for e in child_after.audit)


async def test_a_signed_pause_reaches_the_child_and_a_copy_sent_again_is_refused(own_clock):
    policy, cfo = signed_policy()
    policy = policy.model_copy(update={"approve_all_side_effects": True})
    async with AgentTestbed(triage, model=model_with_a_report(), env=own_clock) as bed:
        client = bed.client.temporal
        run = await bed.start("triage", "Ticket 13", policy=policy)
        [delegation] = (await eventually(lambda: _delegated(run))).delegations
        child = bed.client.run(delegation.child_id)
        await child.next_approval()
        await runs.pause(client, run.run_id, Actor(by="cfo"))  # unsigned: refused
        identity = (await run.state()).store_key
        signed_pause = Actor(by="cfo", signed=cfo.change(identity, "cfo", "pause", {"reason": ""}))
        await client.get_workflow_handle(run.run_id).signal("pause", signed_pause)
        await eventually(lambda: _paused(child))
        await runs.resume(client, run.run_id, Actor(by="cfo"), cfo)
        await eventually(lambda: _paused(child, False))
        # The same signed pause again, at the parent and at the child: used already there.
        for target in (run.run_id, child.run_id):
            await client.get_workflow_handle(target).signal("pause", signed_pause)
        parent_refused = await eventually(lambda: _refused(run, 2))
        child_refused = await eventually(lambda: _refused(child, 1))
        assert not (await run.state()).pause_requested
        assert not (await child.state()).pause_requested
        await runs.cancel(client, run.run_id, Actor(by="cfo"), cfo)
        assert (await run.result()).status == "cancelled"
    assert "unsigned pause" in parent_refused[0]
    assert "used already" in parent_refused[1] and "used already" in child_refused[0]


async def _delegated(run):
    state = await run.state()
    return state if state.delegations else None


async def _refused(handle, count: int) -> list[str] | None:
    found = refusals(await handle.state())
    return found if len(found) >= count else None


async def _paused(handle, wanted: bool = True) -> bool | None:
    state = await handle.state()
    return True if state.pause_requested is wanted else None
