"""A run trusts the deployment's keys and its own agent, never the task queue.

Anyone who may start a workflow may also poll our task queue. Here the attacker's worker
does: it hosts a parent that starts the refund agent as its sub-agent with `policy {}`,
and it takes a fresh run's first task and continues it as new with a state of its own
making (`policy {}`, the chain's own identity, packed by the very run it continues). The
provider must pay nothing:

- with keys (the default a deployment gets), both hand-offs came in the clear and are
  refused by the seal check (workflows/admission.py, `handed_on`);
- without keys (a namespace said to be ours alone), the agent's own floor refuses both
  (workflows/policy.py `loosening`, the one rule for a start, a sub-agent, a continuation).

Each attack is made deterministic by order, not luck: the attacker polls alone while it
takes its tasks, and our worker starts only once the attacker has handed over.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import RawValue, RetryPolicy
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.control import runs
from durable_agents.examples.refund import refund_agent
from durable_agents.runtime.client import connect
from durable_agents.runtime.encryption import new_key
from durable_agents.runtime.settings import Settings
from durable_agents.worker.main import build_worker
from durable_agents.workflows.activity_io import ToolOutcome
from durable_agents.workflows.contracts import DelegatedBy, RunLimits, RunPolicy, RunRequest
from durable_agents.workflows.packing import pack_state
from durable_agents.workflows.people_inputs import Decision
from durable_agents.workflows.records import IDENTITY_SEPARATOR
from durable_agents.workflows.state import RunState
from tests.conftest import (
    approve_when_asked,
    arrange,
    count_effects,
    eventually,
    key_of,
    pay_invoice_call,
    run_id,
    settings_for,
)
from tests.integration.test_outside_callers import causes, journal

REFUND = RunRequest(goal="Refund jane 80 EUR", agent="refund", label="refund-loop")


@workflow.defn(name="AgentWorkflow", sandboxed=False)
class Hijacker:
    """The attacker's code under our workflow's name, on a worker polling our queue: the
    run's first task continues it as new with a state of the attacker's making. It cannot
    read a sealed start (it holds no key), so it takes it raw."""

    @workflow.run
    async def run(self, start: RawValue) -> None:
        info = workflow.info()
        state = RunState.start(info.workflow_id, REFUND, datetime.now(UTC))
        identity = f"{info.workflow_id}{IDENTITY_SEPARATOR}{info.first_execution_run_id}"
        arrange(state, policy=RunPolicy(), identity=identity, agent=refund_agent.record())
        packed = pack_state(state, by_run=info.run_id)
        workflow.continue_as_new(REFUND.model_copy(update={"resume_state_packed": packed}))


# The request the attacker's parent hands its child (set by the test).
HANDED: list[RunRequest] = []


@workflow.defn(name="AgentWorkflow", sandboxed=False)
class ImpostorParent:
    """The attacker's code under our workflow's name, so the child's parent is "an agent
    run on this queue": it starts the refund agent as its sub-agent with `policy {}`. A
    task of the child itself it leaves to the deployment's worker (it fails the task)."""

    @workflow.run
    async def run(self, start: RawValue) -> None:
        info = workflow.info()
        if info.parent is not None:
            raise RuntimeError("the child's task: left to the deployment's worker")
        await workflow.execute_child_workflow(
            "AgentWorkflow", HANDED[0], id=f"{info.workflow_id}-child", task_queue=info.task_queue
        )


def attacker_worker(client: Client, queue: str, workflow_class: type) -> Worker:
    """The attacker's worker: a plain client (no keys), polling our task queue."""
    return Worker(
        client,
        task_queue=queue,
        workflows=[workflow_class],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )


async def chain_length(client: Client, wid: str) -> int:
    handle = client.get_workflow_handle(wid)
    run: str | None = (await handle.describe()).run_id
    count = 0
    while run:
        count += 1
        first = await anext(
            aiter(client.get_workflow_handle(wid, run_id=run).fetch_history_events())
        )
        run = first.workflow_execution_started_event_attributes.continued_execution_run_id or None
    return count


async def exists(client: Client, wid: str) -> bool:
    try:
        await client.get_workflow_handle(wid).describe()
    except Exception:
        return False
    return True


async def failure(client: Client, wid: str) -> str:
    """The run's failure, as a client holding the keys reads it (messages are sealed)."""
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(client.get_workflow_handle(wid).result(), timeout=60)
    cause = failed.value.cause
    return getattr(cause, "message", None) or str(cause)


@pytest.fixture(params=["keys", "no keys, namespace ours alone"])
async def deployment(request, dev_env, model_server, tmp_path) -> AsyncIterator[Settings]:
    settings = settings_for(dev_env.client, tmp_path / "data", model_server.port, versioning=False)
    if request.param == "keys":
        update: dict[str, Any] = {
            "encryption_keys": SecretStr(f"k1={new_key()}"),
            "namespace_is_ours_alone": False,
        }
        settings = settings.model_copy(update=update)
    yield settings


EXPECTED = {
    True: (
        "a sub-agent's terms (delegated_by) is taken only sealed with the deployment's key",
        "a carried state (a continuation's) is taken only sealed with the deployment's key",
    ),
    False: (
        "the requested policy loosens the agent's: approve_payments_above must be 50 or less",
        "the carried state: the requested policy loosens the agent's: approve_payments_above",
    ),
}


async def test_a_poller_of_our_queue_gets_no_refund(
    dev_env: WorkflowEnvironment, deployment: Settings
) -> None:
    settings, plain = deployment, dev_env.client
    client = await connect(settings)
    before = journal(settings)
    parent, hijacked = run_id("fake-parent"), run_id("hijacked")
    child_request = REFUND.model_copy(
        update={
            "policy": RunPolicy(),
            "delegated_by": DelegatedBy(run_id=parent, step=1, tool_call_id="c1", agent="triage"),
        }
    )
    # A fresh run, started as a user would (sealed where there are keys): the attacker's
    # worker, polling our queue alone, takes its first task and continues it as new.
    async with attacker_worker(plain, settings.task_queue, Hijacker):
        await client.start_workflow(
            "AgentWorkflow", REFUND, id=hijacked, task_queue=settings.task_queue
        )

        async def continued() -> bool:
            return await chain_length(plain, hijacked) >= 2

        await eventually(continued)
    # A parent of the attacker's, on our queue, starts the refund agent as its child.
    HANDED[:] = [child_request]
    async with attacker_worker(plain, settings.task_queue, ImpostorParent):
        await plain.start_workflow(
            "AgentWorkflow", REFUND, id=parent, task_queue=settings.task_queue
        )
        await eventually(lambda: exists(plain, f"{parent}-child"))
    keyed = settings.encryption_on
    async with build_worker(await connect(settings, for_worker=True), settings):
        child_said = await failure(client, f"{parent}-child")
        continued_said = await failure(client, hijacked)
    await plain.get_workflow_handle(parent).terminate("the test is over")
    assert EXPECTED[keyed][0] in child_said
    assert EXPECTED[keyed][1] in continued_said
    assert journal(settings) == before  # the provider paid nothing


async def test_a_real_continuation_goes_on_across_a_key_rotation(
    dev_env: WorkflowEnvironment, model_server, tmp_path
) -> None:
    """A sealed run continues as new (its state carried under k1) and parks for approval;
    the deployment rotates to k2 (k1 kept to read); the run goes on and pays once."""
    old = f"k1={new_key()}"
    settings = settings_for(dev_env.client, tmp_path / "data", model_server.port).model_copy(
        update={"encryption_keys": SecretStr(old), "namespace_is_ours_alone": False}
    )
    rid = run_id("rotated")
    request = RunRequest(
        goal="pay", label="pay-invoice", limits=RunLimits(continue_as_new_after_events=50)
    )
    client = await connect(settings)
    async with build_worker(await connect(settings, for_worker=True), settings):
        await runs.start_run(client, settings, request, rid)

        async def continued_and_waiting() -> bool:
            state = await runs.get_state(client, rid)
            return state.chain >= 2 and bool(state.pending_approvals)

        await eventually(continued_and_waiting)
    rotated = settings.model_copy(update={"encryption_keys": SecretStr(f"k2={new_key()},{old}")})
    client = await connect(rotated)
    async with build_worker(await connect(rotated, for_worker=True), rotated):
        await runs.approve(client, rid, Decision(by="alice"))
        await runs.wait_result(client, rid)
        described = await client.get_workflow_handle(rid).describe()
    assert described.status == WorkflowExecutionStatus.COMPLETED
    assert count_effects(rotated, rid, "charge") == 1


async def test_a_worker_without_keys_refuses_to_serve_unless_told(
    dev_env: WorkflowEnvironment, model_server, tmp_path
) -> None:
    settings = settings_for(dev_env.client, tmp_path / "data", model_server.port).model_copy(
        update={"namespace_is_ours_alone": False}
    )
    with pytest.raises(ValueError, match="agentctl keys new") as refused:
        build_worker(dev_env.client, settings)
    assert "\n" not in str(refused.value)
    assert "AGENT_NAMESPACE_IS_OURS_ALONE=true" in str(refused.value)
    queue = f"q-{uuid.uuid4().hex[:6]}"
    told = settings.model_copy(update={"namespace_is_ours_alone": True, "task_queue": queue})
    async with build_worker(dev_env.client, told):
        pass


@workflow.defn(name="AgentWorkflow", sandboxed=False)
class DirectPayer:
    """The attacker's code for a run's first task: it schedules our tool itself, for the
    run's own identity, on our queue (our caller check sees an AgentWorkflow on it)."""

    @workflow.run
    async def run(self, start: RawValue) -> None:
        info = workflow.info()
        identity = f"{info.workflow_id}{IDENTITY_SEPARATOR}{info.first_execution_run_id}"
        await workflow.execute_activity(
            "run_tool",
            pay_invoice_call(identity),
            result_type=ToolOutcome,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


async def test_a_poller_of_our_queue_cannot_feed_our_activities(
    dev_env: WorkflowEnvironment, model_server, tmp_path
) -> None:
    """With keys, what an agent run's activities are fed must be sealed: a task taken by
    a poller without the key schedules our tool with an input in the clear, refused
    before the tool acts (runtime/refused_payloads.py, `_deployment_only`)."""
    settings = settings_for(
        dev_env.client, tmp_path / "data", model_server.port, versioning=False
    ).model_copy(
        update={"encryption_keys": SecretStr(f"k1={new_key()}"), "namespace_is_ours_alone": False}
    )
    client, plain, rid = await connect(settings), dev_env.client, run_id("fed")
    async with attacker_worker(plain, settings.task_queue, DirectPayer):
        await client.start_workflow("AgentWorkflow", REFUND, id=rid, task_queue=settings.task_queue)

        async def scheduled() -> bool:
            return any(
                e.HasField("activity_task_scheduled_event_attributes")
                for e in await events(plain, rid)
            )

        await eventually(scheduled)
        async with build_worker(await connect(settings, for_worker=True), settings):

            async def failed() -> list[Any]:
                return [
                    e.activity_task_failed_event_attributes.failure
                    for e in await events(plain, rid)
                    if e.HasField("activity_task_failed_event_attributes")
                ]

            [failure] = await eventually(failed)
    said = causes(await client.data_converter.decode_failure(failure))
    assert "run_tool of run" in said and "not sealed with the deployment's key" in said, said
    identity = f"{rid}{IDENTITY_SEPARATOR}"
    assert all(count_effects(settings, key, "charge") == 0 for key in (rid, identity))


async def events(client: Client, wid: str) -> list[Any]:
    return list((await client.get_workflow_handle(wid).fetch_history()).events)


# What the attacker copies out of a history: a sealed `run_tool` input (set by the test).
COPIED: list[Payload] = []


@workflow.defn(name="AgentWorkflow", sandboxed=False)
class Replayer:
    """The attacker's code for a run's first task: it schedules our tool with a sealed
    input copied from another run's history (it cannot read it, only copy it)."""

    @workflow.run
    async def run(self, start: RawValue) -> None:
        await workflow.execute_activity(
            "run_tool",
            RawValue(COPIED[0]),
            result_type=ToolOutcome,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


async def scheduled_input(client: Client, wid: str, activity_type: str) -> Payload:
    for event in await events(client, wid):
        scheduled = event.activity_task_scheduled_event_attributes
        if event.HasField("activity_task_scheduled_event_attributes") and (
            scheduled.activity_type.name == activity_type
        ):
            payload: Payload = scheduled.input.payloads[0]
            return payload
    raise AssertionError(f"{wid} scheduled no {activity_type}")


async def test_a_sealed_tool_input_copied_into_another_run_pays_nothing(
    dev_env: WorkflowEnvironment, model_server, tmp_path
) -> None:
    """A sealed input is the deployment's but not bound to a run: copied from an approved
    payment's history into another run's task, it names the run it was made for (or, from
    before runs named theirs, none), and the caller check refuses it."""
    settings = settings_for(
        dev_env.client, tmp_path / "data", model_server.port, versioning=False
    ).model_copy(
        update={"encryption_keys": SecretStr(f"k1={new_key()}"), "namespace_is_ours_alone": False}
    )
    client, plain = await connect(settings), dev_env.client
    paid = run_id("paid")
    async with build_worker(await connect(settings, for_worker=True), settings):
        await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), paid)
        await approve_when_asked(client, paid)
        await runs.wait_result(client, paid)
        paid_key = await key_of(client, paid)
    assert count_effects(settings, paid_key, "charge") == 1
    copied = await scheduled_input(plain, paid, "run_tool")
    # From before runs named theirs: the same input naming none, sealed as the worker did.
    [unnamed] = await client.data_converter.encode(
        [pay_invoice_call(paid_key).model_copy(update={"run_id": ""})]
    )
    said = []
    for payload in (copied, unnamed):
        COPIED[:] = [payload]
        rid = run_id("replayed")
        async with attacker_worker(plain, settings.task_queue, Replayer):
            await client.start_workflow(
                "AgentWorkflow", REFUND, id=rid, task_queue=settings.task_queue
            )

            async def scheduled(rid: str = rid) -> bool:
                return any(
                    e.HasField("activity_task_scheduled_event_attributes")
                    for e in await events(plain, rid)
                )

            await eventually(scheduled)
            async with build_worker(await connect(settings, for_worker=True), settings):

                async def failed(rid: str = rid) -> list[Any]:
                    return [
                        e.activity_task_failed_event_attributes.failure
                        for e in await events(plain, rid)
                        if e.HasField("activity_task_failed_event_attributes")
                    ]

                [failure] = await eventually(failed)
        said.append(causes(await client.data_converter.decode_failure(failure)))
        replayed_key = f"{rid}{IDENTITY_SEPARATOR}"
        assert count_effects(settings, rid, "charge") == 0
        assert count_effects(settings, replayed_key, "charge") == 0
    assert "the input is tagged for another run than" in said[0], said[0]
    assert "run_tool's input names no run" in said[1], said[1]
    assert count_effects(settings, paid_key, "charge") == 1  # paid once, for its approval
