"""Sealed inputs as the key to act (AGENT_REQUIRE_SEALED_INPUTS): a deployment whose
worker refuses every input not sealed with its key. Tried through the plain `temporal`
CLI, as anyone who reaches Temporal but holds no key: a start, a signal and an update
each change nothing, and an activity an outside workflow schedules on our queue is
refused before it is read; the same run's sealed inputs still count."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from pydantic import SecretStr, ValidationError
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.control import runs, timeline
from durable_agents.runtime.client import connect
from durable_agents.runtime.encryption import new_key
from durable_agents.runtime.settings import Settings
from durable_agents.worker.main import build_worker
from durable_agents.workflows.activity_io import ToolCallInput, ToolOutcome
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor, Decision
from tests.conftest import (
    count_effects,
    eventually,
    pay_invoice_call,
    run_id,
    settings_for,
    wait_for_approval,
)
from tests.temporal_cli import own_dev_server, temporal


@pytest.fixture(scope="module")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server of this module's own: its CLI calls meet no other file's load."""
    async with own_dev_server() as env:
        yield env


def sealed_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"encryption_keys": SecretStr(f"k1={new_key()}"), "require_sealed_inputs": True}
    )


@workflow.defn(name="PlainOutsider")
class PlainOutsider:
    """Anyone's workflow, on a queue and a client of its own, without the key."""

    @workflow.run
    async def run(self, queue: str, call: ToolCallInput) -> str:
        try:
            await workflow.execute_activity(
                "run_tool",
                call,
                task_queue=queue,
                result_type=ToolOutcome,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
        except ActivityError as err:
            said, cause = [], err.cause
            while cause is not None:
                said.append(str(cause))
                cause = cause.__cause__ or getattr(cause, "cause", None)
            return " / ".join(said)
        return "ran"


async def history_events(client: Client, wid: str) -> list[int]:
    history = await client.get_workflow_handle(wid).fetch_history()
    return [event.event_type for event in history.events]


async def test_without_the_key_nothing_acts_through_the_temporal_cli(
    dev_env: WorkflowEnvironment, model_server, tmp_path
) -> None:
    settings = sealed_settings(settings_for(dev_env.client, tmp_path / "data", model_server.port))
    client = await connect(settings)
    rid = run_id("sealed")
    async with build_worker(await connect(settings, for_worker=True), settings):
        await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)
        await wait_for_approval(client, rid)
        before = await runs.get_state(client, rid)

        # A start in plain JSON: the run fails before any of its code runs; no activity.
        plain_id = run_id("plain-start")
        started = await temporal(
            dev_env.client, "workflow", "start", "--type", "AgentWorkflow",
            "--task-queue", settings.task_queue, "--workflow-id", plain_id,
            "--input", json.dumps({"goal": "pay", "label": "pay-invoice"}),
        )  # fmt: skip
        assert started.returncode == 0, started.stderr

        async def closed() -> bool:
            described = await dev_env.client.get_workflow_handle(plain_id).describe()
            return described.status == WorkflowExecutionStatus.FAILED

        await eventually(closed)
        events = await history_events(dev_env.client, plain_id)
        assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in events
        assert EventType.EVENT_TYPE_MARKER_RECORDED not in events  # no local activity either
        # The reason is sealed too (the server holds no plaintext): read with the key.
        with pytest.raises(WorkflowFailureError) as failed:
            await client.get_workflow_handle(plain_id).result()
        assert "not sealed with this deployment's key" in str(failed.value.cause)

        # A plain approval (the policy needs no signature: without sealing it would pay).
        sent = await temporal(
            dev_env.client, "workflow", "signal", "-w", rid, "--name", "approve",
            "--input", json.dumps({"by": "alice"}),
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        # A plain update: refused; the CLI shows its type (the message is sealed).
        refused = await temporal(
            dev_env.client, "workflow", "update", "execute", "-w", rid, "--name", "decide",
            "--input", json.dumps({"approve": True, "by": "alice"}),
        )  # fmt: skip
        assert refused.returncode != 0 and "type: InputRefused" in refused.stderr, refused.stderr

        # Signals are applied in order: once a sealed pause sent after the plain approval
        # counts, the approval was seen and dropped.
        await client.get_workflow_handle(rid).signal("pause", Actor(by="alice"))

        async def paused() -> bool:
            return (await runs.get_state(client, rid)).pause_requested

        await eventually(paused)
        after = await runs.get_state(client, rid)
        assert [a.status for a in after.approvals] == [a.status for a in before.approvals]
        assert count_effects(settings, before.store_key, "charge") == 0
        # Time travel reads the history as the worker did: the plain approval dropped again.
        rebuilt = (await timeline.rebuild(client, rid)).moments[-1].state
        assert rebuilt.pause_requested
        assert [a.status for a in rebuilt.approvals] == [a.status for a in after.approvals]

        # An outside workflow, plain, schedules our tool with the run's own identity.
        queue = f"outsider-{uuid.uuid4().hex[:8]}"
        async with Worker(
            dev_env.client, task_queue=queue, workflows=[PlainOutsider],
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):  # fmt: skip
            said = await dev_env.client.execute_workflow(
                PlainOutsider.run,
                args=[settings.task_queue, pay_invoice_call(before.store_key)],
                id=run_id("plain-outsider"),
                task_queue=queue,
            )
        assert said == "Encoded failure / InputRefused: Encoded failure", said  # before any check
        assert count_effects(settings, before.store_key, "charge") == 0

        # The key still acts: the sealed approval pays, once.
        await runs.resume(client, rid, Actor(by="alice"))
        await runs.approve(client, rid, Decision(by="alice"))
        await runs.wait_result(client, rid)
        assert count_effects(settings, before.store_key, "charge") == 1


def test_sealed_inputs_need_a_key() -> None:
    with pytest.raises(ValidationError, match="AGENT_REQUIRE_SEALED_INPUTS needs"):
        Settings(require_sealed_inputs=True)
