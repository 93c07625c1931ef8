"""A leaked signing key can be revoked: runs already open refuse it from the moment they
hear (`agentctl signing revoke`), runs started later refuse it from AGENT_REVOKED_KEYS,
and the deployment's other keys go on counting."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agents.control import revocation, runs
from durable_agents.control.runs import RunError
from durable_agents.control.signer import Signer
from durable_agents.runtime.settings import Settings
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunPolicy, RunRequest, TrustedKey
from durable_agents.workflows.people_inputs import DecideRequest, KeyRevocation
from durable_agents.workflows.records import ApprovalStatus
from durable_agents.workflows.signing import new_key
from tests.conftest import count_effects, eventually, run_id, wait_for_approval


def desk() -> tuple[RunPolicy, Signer, Signer]:
    leaked, leaked_public = new_key()
    spare, spare_public = new_key()
    policy = RunPolicy(
        require_signed_decisions=True,
        trusted_keys={
            "laptop": TrustedKey(public_key=leaked_public, signs_for=["alice"]),
            "desk": TrustedKey(public_key=spare_public, signs_for=["alice"]),
        },
    )
    return policy, Signer(leaked, "laptop"), Signer(spare, "desk")


async def test_a_revoked_key_counts_no_more_in_a_run_started_before(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    client = dev_env.client
    policy, laptop, spare = desk()
    rid = run_id("revoked")
    request = RunRequest(goal="pay", label="pay-invoice", policy=policy)
    await runs.start_run(client, settings, request, rid)
    await wait_for_approval(client, rid)
    told = await revocation.revoke(
        client, settings, KeyRevocation(key_ids=["laptop"], by="ops", reason="laptop lost")
    )
    assert rid in told

    async def heard() -> bool:
        return "laptop" in (await runs.get_state(client, rid)).revoked_keys

    await eventually(heard)
    approve = DecideRequest(approve=True, by="alice")
    with pytest.raises(RunError, match="the key 'laptop' was revoked"):
        await runs.decide(client, rid, approve, laptop)
    assert (await runs.get_state(client, rid)).pending_approvals  # nothing decided
    assert count_effects(settings, rid, "charge") == 0
    await runs.decide(client, rid, approve, spare)  # the deployment's other key counts
    await runs.wait_result(client, rid)
    state = await runs.get_state(client, rid)
    assert state.approvals[0].status is ApprovalStatus.APPROVED
    assert [e.action for e in state.audit if e.action == "keys_revoked"] == ["keys_revoked"]


async def test_runs_started_after_a_revocation_refuse_the_key_from_the_start(
    dev_env: WorkflowEnvironment, settings: Settings
) -> None:
    client = dev_env.client
    policy, laptop, _ = desk()
    revoked = settings.model_copy(update={"revoked_keys": ["laptop"]})
    async with build_worker(client, revoked):
        rid = run_id("later")
        request = RunRequest(goal="pay", label="pay-invoice", policy=policy)
        await runs.start_run(client, revoked, request, rid)
        await wait_for_approval(client, rid)
        assert (await runs.get_state(client, rid)).revoked_keys == ["laptop"]
        with pytest.raises(RunError, match="the key 'laptop' was revoked"):
            await runs.decide(client, rid, DecideRequest(approve=True, by="alice"), laptop)
        await client.get_workflow_handle(rid).terminate("test done")
