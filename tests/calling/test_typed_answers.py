"""Typed answers (Agent(output_type=...)) and agents called from a team's own workflow
(run_agent), on Temporal's time-skipping server with a scripted model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError, ChildWorkflowError
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.client import RunError, RunHandle
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from durable_agents.workflows.output import OUTPUT_ATTEMPTS
from tests.calling.billing import (
    GOOD,
    AsksForADict,
    Billing,
    BillingUntyped,
    CallsNobody,
    Dispute,
    TriageDecision,
    triage,
)


async def test_a_valid_answer_is_kept_typed_in_the_result_and_the_state(own_clock):
    model = ScriptedModel([say(f"```json\n{GOOD}\n```")])
    async with AgentTestbed(triage, model=model, env=own_clock) as bed:
        run = await bed.start("triage", "Customer 42 was charged twice")
        decision = await run.output(TriageDecision)
        state = await run.state()
        summary = await run.summary()
    assert decision == TriageDecision(refund=True, priority="high")
    assert state.output == {"refund": True, "priority": "high"}
    assert summary.output == state.output
    # The model was told the answer's shape.
    assert '"priority"' in model.requests[0].messages[-1]["content"]


async def test_an_answer_out_of_shape_goes_back_to_the_model_with_the_error(own_clock):
    model = ScriptedModel([say("Refund them."), say('{"refund": "maybe"}'), say(GOOD)])
    async with AgentTestbed(triage, model=model, env=own_clock) as bed:
        run = await bed.start("triage", "Customer 42 was charged twice")
        decision = await run.output(TriageDecision)
    assert decision.refund is True
    retold = [r.messages[-1]["content"] for r in model.requests[1:]]
    assert "not a valid TriageDecision" in retold[0]
    assert "refund" in retold[1] and "priority" in retold[1]  # the fields it got wrong


async def test_a_run_that_never_answers_in_shape_fails_with_the_reason(own_clock):
    model = ScriptedModel([say("no JSON here")] * OUTPUT_ATTEMPTS)
    async with AgentTestbed(triage, model=model, env=own_clock) as bed:
        run = await bed.start("triage", "Customer 42 was charged twice")
        result = await run.result()
        with pytest.raises(RunError, match="gave no TriageDecision"):
            await run.output(TriageDecision)
    assert result.status == "failed"
    assert f"never gave a valid TriageDecision in {OUTPUT_ATTEMPTS} answers" in (result.error or "")
    assert len(model.requests) == OUTPUT_ATTEMPTS  # bounded: no fourth ask


async def test_a_workflow_calls_the_agent_and_branches_on_its_typed_answer(own_clock):
    model = ScriptedModel([say('{"refund": false, "priority": "low"}')])
    own = [Billing, BillingUntyped]
    async with AgentTestbed(triage, model=model, env=own_clock, workflows=own) as bed:
        outcome = await bed.temporal.execute_workflow(
            Billing.run, Dispute(text="Customer 7 asks why"), id="billing-7",
            task_queue=bed.task_queue,
        )  # fmt: skip
        untyped = await bed.temporal.execute_workflow(
            BillingUntyped.run, "Customer 8", id="billing/8 x", task_queue=bed.task_queue
        )
        child = await bed.client.run(untyped[0]).summary()
    assert outcome == "close (low)"
    child_id, status, output = untyped
    # Named after its caller (made a valid run id), found like any run.
    assert child_id.startswith("billing-8-x.triage-") and status == "completed"
    assert output == str({"refund": False, "priority": "low"})
    assert child.agent == "triage" and child.output == {"refund": False, "priority": "low"}


async def test_the_childs_approval_waits_for_a_person_like_any_run(own_clock):
    model = ScriptedModel([call("issue_refund", customer="42", amount=80.0), say(GOOD)])
    async with AgentTestbed(triage, model=model, env=own_clock, workflows=[Billing]) as bed:
        handle, child = await billing_with_child(bed, "42")
        request = await child.next_approval()
        assert request.tool == "issue_refund"
        await child.approve(request.request_id, by="finance")
        assert await handle.result() == "refund (high)"


async def test_a_child_that_ends_without_an_answer_is_a_typed_failure(own_clock):
    model = ScriptedModel([call("issue_refund", customer="42", amount=80.0)])
    async with AgentTestbed(triage, model=model, env=own_clock, workflows=[Billing]) as bed:
        handle, child = await billing_with_child(bed, "43")
        await child.next_approval()
        await child.cancel(by="finance", reason="not ours")
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "AgentGaveNoAnswer"
    assert "ended cancelled" in cause.message
    assert not isinstance(cause, ChildWorkflowError)


async def billing_with_child(
    bed: AgentTestbed, n: str
) -> tuple[WorkflowHandle[Any, str], RunHandle]:
    """The team's Billing workflow started with a child of a known id, and that child."""
    handle = await bed.temporal.start_workflow(
        Billing.run,
        Dispute(text=f"Customer {n} charged twice", child_id=f"b{n}.triage"),
        id=f"billing-{n}",
        task_queue=bed.task_queue,
    )
    return handle, await started(bed, f"b{n}.triage")


async def started(bed: AgentTestbed, run_id: str) -> RunHandle:
    """The child run once its caller has started it (its start is the caller's next
    workflow task: waited for, not guessed)."""
    for _ in range(600):
        try:
            await bed.temporal.get_workflow_handle(run_id).describe()
            return bed.client.run(run_id)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_id} never started")


async def refusal_of(env, workflow_run, arg: str, workflow_id: str) -> str:
    """The AgentRequestInvalid message a calling workflow fails with, at once: bounded,
    since without the check the call would wait or fail its task forever."""
    model = ScriptedModel([say(GOOD)])
    own = [CallsNobody, AsksForADict]
    async with AgentTestbed(triage, model=model, env=env, workflows=own) as bed:
        with pytest.raises(WorkflowFailureError) as failed:
            started = bed.temporal.execute_workflow(
                workflow_run, arg, id=workflow_id, task_queue=bed.task_queue
            )
            await asyncio.wait_for(started, 60)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "AgentRequestInvalid"
    return cause.message


async def test_an_agent_the_worker_does_not_serve_is_refused_at_once(own_clock):
    said = await refusal_of(own_clock, CallsNobody.run, "tirage", "calls-nobody")
    assert "no agent named 'tirage'" in said and "(agents: triage)" in said


async def test_an_output_type_that_is_no_model_is_refused_at_once(own_clock):
    said = await refusal_of(own_clock, AsksForADict.run, "x", "asks-dict")
    assert "is not a pydantic model class" in said
