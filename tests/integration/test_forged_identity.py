"""A run's identity comes from Temporal, never from the caller (invariant 11): a start
that carries another run's state, names a parent that did not start it, or forks with a
doctored state is refused before it writes anything, and the victim's rows are as they
were."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowFailureError

from durable_agents.activities.stores import Stores
from durable_agents.control import runs, timeline
from durable_agents.control.signer import Signer
from durable_agents.workflows.contracts import (
    DelegatedBy,
    ForkSpec,
    RunPolicy,
    RunRequest,
    TrustedKey,
)
from durable_agents.workflows.packing import pack_state
from durable_agents.workflows.people_inputs import Actor
from durable_agents.workflows.signing import new_key
from tests.conftest import count_effects, run_id, wait_for_approval
from tests.integration.test_outside_callers import causes

pytestmark = pytest.mark.usefixtures("worker")


async def refused(client, settings, request: RunRequest) -> tuple[str, str]:
    """Start as an attacker would (the client's start, no checks of ours); the failure."""
    rid = run_id("forged")
    handle = await client.start_workflow(
        "AgentWorkflow", request, id=rid, task_queue=settings.task_queue
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), timeout=60)  # a taken start would wait
    return rid, str(getattr(failed.value.cause, "message", failed.value.cause))


async def test_a_start_naming_another_runs_identity_writes_nothing_under_it(dev_env, settings):
    client = dev_env.client
    _, public = new_key()
    policy = RunPolicy(
        require_signed_decisions=True, trusted_keys={"k": TrustedKey(public_key=public)}
    )
    victim = run_id("victim")
    await runs.start_run(
        client, settings, RunRequest(goal="pay", label="pay-invoice", policy=policy), victim
    )
    await wait_for_approval(client, victim)
    state = await runs.get_state(client, victim)
    stores = Stores.open(settings)
    rows_before = stores.transcript.read(state.store_key)
    carried = state.model_dump(mode="json")

    attacks = {
        "resume_state": RunRequest(goal="pay", label="pay-invoice", resume_state=carried),
        "resume_state_packed": RunRequest(
            goal="pay", label="pay-invoice", resume_state_packed=pack_state(state)
        ),
        "delegated_by": RunRequest(
            goal="pay",
            label="pay-invoice",
            delegated_by=DelegatedBy(run_id=victim, step=1, tool_call_id="call-1"),
        ),
    }
    for name, request in attacks.items():
        rid, why = await refused(client, settings, request)
        assert why.startswith("refused:"), (name, why)
        assert stores.transcript.read(f"{rid}@x") == []
    # A fork whose carried state drops the parent's signing policy: the fork takes the
    # parent's own policy from the parent, which counts only a signed fork.
    doctored = {**carried, "policy": RunPolicy().model_dump(mode="json")}
    fork = RunRequest(
        goal="pay",
        label="pay-invoice",
        fork=ForkSpec(parent_run_id=victim, state=doctored, by="mallory"),
    )
    rid, why = await refused(client, settings, fork)
    assert "unsigned fork by 'mallory'" in why, why
    fork_state = await runs.get_state(client, rid)
    assert fork_state.policy == state.policy
    assert stores.transcript.read(fork_state.store_key) == []  # nothing of the victim's copied

    assert stores.transcript.read(state.store_key) == rows_before
    after = await runs.get_state(client, victim)
    assert after.audit == state.audit and after.moment == state.moment
    assert after.pending_approvals  # the victim still waits for its own approver


async def test_a_fork_carrying_a_state_its_parent_never_had_is_refused(dev_env, settings):
    """A fork signed by a key the parent trusts (one that approves nothing), carrying a
    state that marks the payment tool read-only: checked against the parent's own record
    at that moment, it is refused before it copies or runs anything; nothing is paid."""
    client = dev_env.client
    key, public = new_key()
    nobody = Signer(key, "ops-desk")
    policy = RunPolicy(
        require_signed_decisions=True,
        trusted_keys={"ops-desk": TrustedKey(public_key=public, signs_for=["nobody"])},
    )
    victim = run_id("victim")
    request = RunRequest(goal="pay", label="pay-invoice", policy=policy)
    await runs.start_run(client, settings, request, victim)
    await wait_for_approval(client, victim)
    found = await timeline.rebuild(client, victim)
    moment = next(m for m in found.moments if m.kind == "model")
    carried = moment.state.model_dump(mode="json")
    for spec in carried["agent"]["tools"]:
        if spec["name"] == "pay_invoice":
            spec["risk"] = "read_only"
    fork_id = run_id("fork")
    spec = ForkSpec(parent_run_id=victim, state=carried, by="nobody")
    says = spec.what_it_says(fork_id)
    spec.signed = nobody.change(moment.state.store_key, "nobody", "fork", says)
    fork = RunRequest(goal="pay", label="pay-invoice", policy=policy, fork=spec)
    handle = await client.start_workflow(
        "AgentWorkflow", fork, id=fork_id, task_queue=settings.task_queue
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), timeout=60)
    why = str(getattr(failed.value.cause, "message", failed.value.cause))
    assert why == (
        f"refused: the fork's state is not its parent's at moment {moment.index} "
        "(agent differs from the parent's record)"
    )
    forked = await runs.get_state(client, fork_id)
    assert Stores.open(settings).transcript.read(forked.store_key) == []  # nothing copied
    assert count_effects(settings, fork_id, "charge") == 0
    # The same fork, carrying the parent's own state, is taken and asks for the payment.
    honest_id = run_id("fork")
    honest = ForkSpec(parent_run_id=victim, state=moment.state.model_dump(mode="json"), by="nobody")
    honest.signed = nobody.change(
        moment.state.store_key, "nobody", "fork", honest.what_it_says(honest_id)
    )
    await client.start_workflow(
        "AgentWorkflow",
        RunRequest(goal="pay", label="pay-invoice", policy=policy, fork=honest),
        id=honest_id,
        task_queue=settings.task_queue,
    )
    await wait_for_approval(client, honest_id)
    assert count_effects(settings, honest_id, "charge") == 0
    # Terminated and started again under the same id, with the same signed request: the
    # signature was counted (outside the fork, in the stores) and counts no more.
    await client.get_workflow_handle(honest_id).terminate("someone with namespace access")
    again = await client.start_workflow(
        "AgentWorkflow",
        RunRequest(goal="pay", label="pay-invoice", policy=policy, fork=honest),
        id=honest_id,
        task_queue=settings.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as refused:
        await asyncio.wait_for(again.result(), timeout=60)
    assert "refused: this signed fork was used already, by run " in causes(refused.value)
    restarted = await runs.get_state(client, honest_id)
    assert Stores.open(settings).transcript.read(restarted.store_key) == []
    await runs.cancel(client, victim, Actor(by="nobody"), nobody)
