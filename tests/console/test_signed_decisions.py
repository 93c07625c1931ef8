"""Signed decisions on the dev server: a run whose policy requires them counts only a
decision signed for that run, request and arguments by a key it trusts, and records every
other attempt. Tried through Temporal directly, as anyone who reaches it could."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from durable_agents.control import runs
from durable_agents.control.runs import RunError
from durable_agents.control.signer import Signer, kept_signer
from durable_agents.workflows.contracts import RunPolicy, TrustedKey
from durable_agents.workflows.people_inputs import DecideRequest, Decision
from durable_agents.workflows.records import ApprovalStatus, RunStatus
from durable_agents.workflows.signing import NEWEST, arguments_digest, moment_tag, new_key, sign
from durable_agents.workflows.state import RunState
from tests.console.live import LiveConsole, signed_in
from tests.console.runs_for_console import waiting_payment


def _refusals(state: RunState) -> list[str]:
    return [e.detail for e in state.audit if e.action == "decision_refused"]


async def _refused_update(client, rid: str, request: DecideRequest, says: str) -> None:
    try:
        await runs.decide(client, rid, request)
    except RunError as err:
        assert says in str(err), err
    else:
        raise AssertionError("the decision was accepted")


async def test_only_a_decision_signed_for_this_request_counts(
    console: LiveConsole, dev_env: WorkflowEnvironment
) -> None:
    client, settings = dev_env.client, console.settings
    console_key = kept_signer(settings.console_key_path, settings.console_key_id)
    cfo_key, cfo_public = new_key()
    policy = RunPolicy(
        require_signed_decisions=True,
        trusted_keys={
            "console": TrustedKey(public_key=console_key.public_key),
            "cfo-laptop": TrustedKey(public_key=cfo_public, signs_for=["cfo"]),
        },
    )
    state = await waiting_payment(client, settings, policy)
    other = await waiting_payment(client, settings, policy)
    rid, request = state.run_id, state.pending_approvals[0]

    # An unsigned approve in the CFO's name, as a signal and as an update.
    await runs.approve(client, rid, Decision(by="cfo"))
    await _refused_update(client, rid, DecideRequest(approve=True, by="cfo"), "unsigned")

    # A forged signature: another key, claiming the console's key id.
    forger, _ = new_key()
    # Each signed as our signers sign for this run: v3, at the moment they saw.
    seen, their_moment = (
        await runs.latest_moment(client, rid),
        await runs.latest_moment(client, other.run_id),
    )
    forged = Signer(forger, "console").approval(
        state.store_key, "cfo", True, request, "", NEWEST, seen
    )
    await _refused_update(
        client, rid, DecideRequest(approve=True, by="cfo", signed=forged), "forged signature"
    )
    # A real signature, made for the other run's request, replayed here.
    theirs = console_key.approval(
        other.store_key, "cfo", True, other.pending_approvals[0], "", NEWEST, their_moment
    )
    await _refused_update(
        client, rid, DecideRequest(approve=True, by="cfo", signed=theirs), "(run differs)"
    )
    # A real signature over arguments edited after signing (a smaller amount shown).
    edited = request.model_copy(update={"arguments": {**request.arguments, "amount": "1.00"}})
    shown = console_key.approval(state.store_key, "cfo", True, edited, "", NEWEST, seen)
    await _refused_update(
        client, rid, DecideRequest(approve=True, by="cfo", signed=shown), "(digest differs)"
    )
    # A person's own key signs only for them.
    for_mallory = Signer(cfo_key, "cfo-laptop").approval(
        state.store_key, "mallory", True, request, "", NEWEST, seen
    )
    await _refused_update(
        client,
        rid,
        DecideRequest(approve=True, by="mallory", signed=for_mallory),
        "may not sign for 'mallory'",
    )
    # A reject signed as approve does not count either.
    as_approve = sign(
        cfo_key,
        "cfo-laptop",
        run=state.store_key,
        by="cfo",
        action="approve",
        request_id=request.request_id,
        digest=arguments_digest(request.arguments),
        at="2026-12-03T00:00:00+00:00",
        version=NEWEST,
        moment=moment_tag(seen) if seen is not None else None,
    )
    await _refused_update(
        client, rid, DecideRequest(approve=False, by="cfo", signed=as_approve), "(action differs)"
    )

    after = await runs.get_state(client, rid)
    assert after.approvals[0].status is ApprovalStatus.PENDING
    refusals = _refusals(after)
    assert len(refusals) == 7, refusals
    assert refusals[0].startswith("cfo: unsigned decision")

    # The CFO's own agentctl key, through the same function the CLI calls.
    said = await runs.decide(
        client, other.run_id, DecideRequest(approve=True, by="cfo"), Signer(cfo_key, "cfo-laptop")
    )
    assert said.startswith("approved: pay_invoice")

    # The console signs what the signed-in user decides.
    http, token = await signed_in(console, "alice")
    form = {"csrf": token, "request_id": request.request_id, "decision": "approve"}
    assert (await http.post(f"/runs/{rid}/decide", data=form)).status_code == 303
    for run in (rid, other.run_id):
        assert (await runs.wait_for_outcome(client, run))["status"] == RunStatus.COMPLETED
    decided = (await runs.get_state(client, rid)).approvals[0]
    assert (decided.status, decided.decided_by) == (ApprovalStatus.APPROVED, "alice")
