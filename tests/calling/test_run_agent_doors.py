"""`run_agent` through every door a caller has, on the dev server with a scripted model:
the caller cancelled while its agent waits for an approval (the agent's run is
cancelled, and nothing acts for it after), the caller terminated (its parent-close
policy, REQUEST_CANCEL, cancels the agent's run; what it paid stays paid once), a second
call under the id of a closed child (refused: a closed child of that id is never started
twice, so never paid twice), and an answer type that is not the agent's, uncaught (the
caller fails with AgentRequestInvalid, in one line, before any child starts)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError, CancelledError

from durable_agents.activities.stores import Stores
from durable_agents.client import RunError
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from tests.calling.door_callers import (
    PAID,
    AsksThePayerForAVerdict,
    Claim,
    PaysThroughAgent,
    payer,
)
from tests.calling.test_typed_answers import started

CALLERS = [PaysThroughAgent, AsksThePayerForAVerdict]
PAID_ANSWER = '{"paid": true}'
STARTED = EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED


def ids() -> tuple[str, str]:
    """A caller id and its child's, unique to the test (the dev server is shared)."""
    tag = uuid.uuid4().hex[:8]
    return f"claim-{tag}", f"claim-{tag}.payer"


def paid_to(customer: str) -> list[float]:
    return [amount for who, amount in PAID if who == customer]


async def effects_of(bed: AgentTestbed, child_id: str) -> list[Any]:
    """What our effect ledger holds for the child's run."""
    key = (await bed.client.run(child_id).state()).store_key
    return list(Stores.open(bed.settings).ledger.effects(key))


def taken(child: str) -> str:
    return (
        f"run id {child!r} is taken: a run of that id was started already (running or "
        "closed), and run_agent never starts a second; give another run_id"
    )


async def refusal(caller: WorkflowHandle[Any, Any]) -> str:
    """The AgentRequestInvalid the caller failed with, in one line (bounded: a call that
    waited instead would hang the test)."""
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(caller.result(), 60)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "AgentRequestInvalid"
    assert cause.non_retryable and "\n" not in cause.message
    return cause.message


async def start_caller(
    bed: AgentTestbed, caller: str, child: str, customer: str
) -> WorkflowHandle[Any, str]:
    return await bed.temporal.start_workflow(
        PaysThroughAgent.run,
        Claim(text=f"Pay {customer}", child_id=child),
        id=caller,
        task_queue=bed.task_queue,
    )


async def test_the_callers_cancel_cancels_the_agent_and_nothing_acts_after(dev_env):
    caller, child = ids()
    customer = f"c-{caller}"
    model = ScriptedModel([call("pay_out", customer=customer, amount=80.0), say(PAID_ANSWER)])
    async with AgentTestbed(payer, model=model, env=dev_env, workflows=CALLERS) as bed:
        handle = await start_caller(bed, caller, child, customer)
        agent = await started(bed, child)
        request = await agent.next_approval()
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
        result = await asyncio.wait_for(agent.result(), 60)  # an agent left running: red
        with pytest.raises(RunError):
            await agent.approve(request.request_id, by="finance")  # too late: it is closed
        ledger = await effects_of(bed, child)
    assert isinstance(failed.value.cause, CancelledError)
    assert result.status == "cancelled"
    assert paid_to(customer) == [] and ledger == []


async def test_the_callers_terminate_cancels_the_agent_and_what_it_paid_stays_paid_once(
    dev_env,
):
    caller, child = ids()
    customer = f"c-{caller}"
    model = ScriptedModel(
        [
            call("pay_out", customer=customer, amount=80.0),
            call("pay_out", customer=customer, amount=90.0),
            say(PAID_ANSWER),
        ]
    )
    async with AgentTestbed(payer, model=model, env=dev_env, workflows=CALLERS) as bed:
        handle = await start_caller(bed, caller, child, customer)
        agent = await started(bed, child)
        first = await agent.next_approval()
        await agent.approve(first.request_id, by="finance")
        second = await agent.next_approval()
        assert second.request_id != first.request_id and paid_to(customer) == [80.0]
        await handle.terminate("the team's operator stopped it")
        # The parent-close policy asks it to cancel (one that abandoned it: red here).
        result = await asyncio.wait_for(agent.result(), 60)
        described = await handle.describe()
        # The team starts its workflow again as it was: the agent's run is not started again.
        again = await start_caller(bed, caller, child, customer)
        refused = await refusal(again)
        ledger = await effects_of(bed, child)
    assert described.status == WorkflowExecutionStatus.TERMINATED
    assert result.status == "cancelled"
    assert refused == taken(child)
    assert paid_to(customer) == [80.0] and len(ledger) == 1


async def test_a_second_call_under_a_closed_childs_id_is_refused_and_pays_nothing(dev_env):
    caller, child = ids()
    customer = f"c-{caller}"
    model = ScriptedModel([call("pay_out", customer=customer, amount=80.0), say(PAID_ANSWER)])
    async with AgentTestbed(payer, model=model, env=dev_env, workflows=CALLERS) as bed:
        handle = await start_caller(bed, caller, child, customer)
        agent = await started(bed, child)
        await agent.approve((await agent.next_approval()).request_id, by="finance")
        assert await handle.result() == "paid"
        asked = len(model.requests)
        again = await start_caller(bed, f"{caller}-again", child, customer)
        refused = await refusal(again)
        children = await bed.temporal.count_workflows(f"WorkflowId = '{child}'")
        ledger = await effects_of(bed, child)
    assert refused == taken(child)
    assert paid_to(customer) == [80.0] and len(ledger) == 1
    assert len(model.requests) == asked and children.count == 1  # its one run, answered


async def test_an_answer_type_not_the_agents_fails_the_caller_in_one_line(dev_env):
    caller = f"verdict-{uuid.uuid4().hex[:8]}"
    model = ScriptedModel([say(PAID_ANSWER)])
    async with AgentTestbed(payer, model=model, env=dev_env, workflows=CALLERS) as bed:
        handle = await bed.temporal.start_workflow(
            AsksThePayerForAVerdict.run, "Pay c-1", id=caller, task_queue=bed.task_queue
        )
        refused = await refusal(handle)
        history = await handle.fetch_history()
    assert refused == (
        "agent 'payer' answers Payout, not Verdict: ask for output_type=Payout, or leave "
        "output_type out"
    )
    assert [e for e in history.events if e.event_type == STARTED] == []
    assert model.requests == []
