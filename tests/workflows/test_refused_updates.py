"""An update refused after it was accepted (a decision or an answer the signing policy does
not count) is the caller's error, InputRefused, in one piece: the run records the refusal
in its audit, and the failure carries no inner exception of the workflow's own."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from durable_agents.control import runs
from durable_agents.workflows.contracts import RunPolicy, RunRequest, TrustedKey
from durable_agents.workflows.people_inputs import DecideRequest
from durable_agents.workflows.records import ApprovalStatus
from durable_agents.workflows.signing import new_key
from tests.conftest import run_id, wait_for_approval

pytestmark = pytest.mark.usefixtures("ts_worker")


async def test_an_unsigned_decision_is_refused_in_one_piece_and_recorded(time_env, ts_settings):
    client, rid = time_env.client, run_id("refused")
    _, public = new_key()
    policy = RunPolicy(
        require_signed_decisions=True,
        trusted_keys={"k": TrustedKey(public_key=public, signs_for=["alice"])},
    )
    request = RunRequest(goal="pay", label="pay-invoice", policy=policy)
    await runs.start_run(client, ts_settings, request, rid)
    await wait_for_approval(client, rid)
    with pytest.raises(WorkflowUpdateFailedError) as raised:
        await client.get_workflow_handle(rid).execute_update(
            "decide", DecideRequest(approve=True, by="alice")
        )
    cause = raised.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InputRefused"
    assert "sign" in cause.message and cause.cause is None
    state = await runs.get_state(client, rid)
    assert [a.status for a in state.approvals] == [ApprovalStatus.PENDING]
    refusal = state.audit[-1]
    assert (refusal.action, refusal.detail.split(":")[0]) == ("decision_refused", "alice")
