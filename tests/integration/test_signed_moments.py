"""Everything signed is bound to its moment (issue 45, item 3), on the dev server with a real
worker: an approval copied out of a run's history and sent again after a rewind does not
count, as the pause signed beside it does not; and a few rows of the door table
(tests/workflows/test_signature_doors.py) sent for real through the `decide` update, each
refused in one line, recorded, with nothing charged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError

from durable_agents.control import runs, timeline
from durable_agents.control.signer import Signer
from durable_agents.workflows.contracts import RunPolicy, RunRequest, TrustedKey
from durable_agents.workflows.people_inputs import Actor, DecideRequest, KeyRevocation
from durable_agents.workflows.records import ApprovalRequest, ApprovalStatus, RunStatus
from durable_agents.workflows.signing import CLOCK_SKEW, sign
from durable_agents.workflows.signing import new_key as new_signing_key
from durable_agents.workflows.state import RunState
from tests.conftest import count_effects, eventually, run_id, wait_for_approval

pytestmark = pytest.mark.usefixtures("worker")


def signed_policy(public: str) -> RunPolicy:
    return RunPolicy(
        approvers={"pay_invoice": ["alice"]},
        require_signed_decisions=True,
        trusted_keys={"alice-laptop": TrustedKey(public_key=public, signs_for=["alice"])},
    )


async def start_payment(client: Client, settings, prefix: str) -> tuple[str, Signer]:
    """A run under a signing policy, waiting for alice to approve the invoice's payment."""
    key, public = new_signing_key()
    rid = run_id(prefix)
    request = RunRequest(
        goal="pay", agent="invoice", label="pay-invoice", policy=signed_policy(public)
    )
    await runs.start_run(client, settings, request, rid)
    await wait_for_approval(client, rid)
    return rid, Signer(key, "alice-laptop")


def refusals(state: RunState) -> list[str]:
    return [e.detail for e in state.audit if e.action == "decision_refused"]


async def refused_decision(client: Client, rid: str, request: DecideRequest) -> str:
    """Send a decision as anyone who reaches Temporal can; the run's one-line refusal."""
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await client.get_workflow_handle(rid).execute_update(
            "decide", request, result_type=ApprovalRequest
        )
    message = str(getattr(failed.value.cause, "message", failed.value.cause))
    assert "\n" not in message, message
    return message


async def decision_in_history(client: Client, rid: str) -> DecideRequest:
    """The `decide` update's input as the run's history holds it (what anyone who may read
    histories can copy)."""
    history = await client.get_workflow_handle(rid).fetch_history()
    for event in history.events:
        if event.HasField("workflow_execution_update_accepted_event_attributes"):
            sent = event.workflow_execution_update_accepted_event_attributes.accepted_request
            if sent.input.name == "decide":
                [decision] = await client.data_converter.decode(
                    sent.input.args.payloads, [DecideRequest]
                )
                assert isinstance(decision, DecideRequest)
                return decision
    raise AssertionError(f"no decide update in {rid}'s history")


async def status_of(client: Client, rid: str, wanted: RunStatus) -> bool | None:
    return True if (await runs.get_state(client, rid)).status is wanted else None


async def test_an_approval_copied_from_the_history_after_a_rewind_charges_nothing(
    dev_env, settings
):
    client = dev_env.client
    rid, alice = await start_payment(client, settings, "copied-approval")
    # alice pauses the run and approves the payment, both signed: the run takes the
    # approval, and holds before it pays.
    await runs.pause(client, rid, Actor(by="alice", reason="pay after lunch"), alice)
    await eventually(lambda: _pause_requested(client, rid))
    said = await runs.decide(client, rid, DecideRequest(approve=True, by="alice"), alice)
    assert said.startswith("approved: pay_invoice")
    await eventually(lambda: status_of(client, rid, RunStatus.PAUSED))
    assert count_effects(settings, rid, "charge") == 0
    copy = await decision_in_history(client, rid)
    assert copy.signed is not None and copy.signed.v == 3  # bound to the moment alice saw

    # Rewound to before the payment was asked for: the run asks again, the same request.
    found = await timeline.rebuild(client, rid)
    asked = next(m for m in found.moments if m.kind == "approval requested")
    await timeline.rewind(client, rid, asked.index - 1, by="alice", signer=alice)
    again = await wait_for_approval(client, rid)
    assert [a.request_id for a in again.pending_approvals] == [copy.request_id]
    counted = len(refusals(await runs.get_state(client, rid)))

    # The copied approval, sent as it was signed: refused, and nothing is charged.
    refusal = await refused_decision(client, rid, copy)
    assert refusal.startswith("the signature was made for"), refusal
    state = await runs.get_state(client, rid)
    assert [a.status for a in state.approvals] == [ApprovalStatus.PENDING]
    assert len(refusals(state)) == counted + 1 and "alice: the signature" in refusals(state)[-1]
    # The pause signed beside it was refused as the rewind reapplied it: the run runs on.
    assert not state.pause_requested
    assert count_effects(settings, rid, "charge") == 0

    # alice, asked again, approves again: that approval counts, and pays once.
    await runs.decide(client, rid, DecideRequest(approve=True, by="alice"), alice)
    assert (await runs.wait_for_outcome(client, rid))["status"] == "completed"
    assert count_effects(settings, rid, "charge") == 1


async def test_failed_signatures_on_a_real_decision_are_refused_in_one_line(dev_env, settings):
    """Rows of the door table for the decision, through the update anyone may send."""
    client = dev_env.client
    rid, alice = await start_payment(client, settings, "decision-doors")
    state = await runs.get_state(client, rid)
    honest = runs.signed_decision(
        state, DecideRequest(approve=True, by="alice"), alice, await runs.latest_moment(client, rid)
    )
    assert honest.signed is not None
    request = state.pending_approvals[0]

    def resigned(**changes: object) -> DecideRequest:
        assert honest.signed is not None
        fields = honest.signed.model_dump(exclude={"signature"}) | changes
        version = fields.pop("v")
        return honest.model_copy(update={"signed": sign(alice.key, **fields, version=version)})

    def at(when: datetime) -> str:
        return when.isoformat(timespec="seconds")

    rows = {
        "unsigned": (honest.model_copy(update={"signed": None}), "unsigned decision"),
        "another run": (resigned(run=f"{rid}@another"), "run differs"),
        "future-dated": (
            resigned(at=at(datetime.now(UTC) + CLOCK_SKEW + timedelta(minutes=2))),
            "in the future",
        ),
        "stale": (
            resigned(at=at(request.requested_at - CLOCK_SKEW - timedelta(minutes=1))),
            "older than the request",
        ),
        "bound to no moment it holds": (resigned(moment="m9999.0123456789abcdef"), "moment 9999"),
    }
    for failure, (sent, said) in rows.items():
        refusal = await refused_decision(client, rid, sent)
        assert said in refusal, (failure, refusal)
    # Revoked: the honest decision itself, once alice's key counts no more.
    await client.get_workflow_handle(rid).signal(
        "revoke_keys", KeyRevocation(key_ids=["alice-laptop"], by="ops", reason="leaked")
    )
    await eventually(lambda: _revoked(client, rid))
    assert "was revoked" in await refused_decision(client, rid, honest)

    state = await runs.get_state(client, rid)
    assert [a.status for a in state.approvals] == [ApprovalStatus.PENDING]
    assert len(refusals(state)) == len(rows) + 1  # each one recorded in the audit
    assert count_effects(settings, rid, "charge") == 0
    await client.get_workflow_handle(rid).terminate("done")  # nobody may sign a cancel now


async def _pause_requested(client: Client, rid: str) -> bool | None:
    return True if (await runs.get_state(client, rid)).pause_requested else None


async def _revoked(client: Client, rid: str) -> bool | None:
    return True if (await runs.get_state(client, rid)).revoked_keys else None
