"""What a worker reads carries the deployment's key, or says it came in the clear: the
worker's codec marks each payload it decodes (runtime/encryption.py SEALED_WITH), the
payload converter reads the mark (runtime/refused_payloads.py). Real codec, real
converter, the SDK's own serialization contexts; no server needed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.api.common.v1 import Payload
from temporalio.converter import ActivitySerializationContext, WorkflowSerializationContext
from temporalio.exceptions import ApplicationError

from durable_agents.runtime.encryption import SEALED_WITH, EncryptionCodec, Keyring, new_key
from durable_agents.runtime.refused_payloads import SealedPayloadConverter
from durable_agents.workflows.contracts import RunRequest, RunResult
from durable_agents.workflows.run_summary import RunSummary
from durable_agents.workflows.state import RunState

KEYS = Keyring.parse(f"k1={new_key()}")
WORKER = EncryptionCodec(KEYS, tolerant=True)
CLIENT = EncryptionCodec(KEYS)
PLAIN = SealedPayloadConverter()


def activity_of(workflow_type: str) -> ActivitySerializationContext:
    return ActivitySerializationContext(
        namespace="default", workflow_id="run-1", workflow_type=workflow_type,
        activity_type="run_tool", activity_id="1", activity_task_queue="q", is_local=False,
    )  # fmt: skip


async def as_worker_reads(value: Any, *, sealed: bool, forged_mark: bool = False) -> Payload:
    [payload] = PLAIN.to_payloads([value])
    if forged_mark:  # a sender in the clear claiming a key
        payload.metadata[SEALED_WITH] = b"k1"
    if sealed:
        [payload] = await CLIENT.encode([payload])
    [read] = await WORKER.decode([payload])
    return read


async def test_a_start_input_is_sealed_only_when_the_worker_opened_it() -> None:
    request = RunRequest(goal="pay")
    for sealed, forged, expected in (
        (True, False, True),
        (False, False, False),
        (False, True, False),
    ):
        payload = await as_worker_reads(request, sealed=sealed, forged_mark=forged)
        [read] = PLAIN.from_payloads([payload], [RunRequest])
        assert read.sealed is expected, (sealed, forged)
    # A client's codec marks nothing: the Web UI and the CLI see payloads as written.
    [payload] = PLAIN.to_payloads([request])
    [opened] = await CLIENT.decode(await CLIENT.encode([payload]))
    assert SEALED_WITH not in opened.metadata


@pytest.mark.parametrize("kind", [RunResult, RunState, RunSummary])
async def test_what_only_the_deployment_writes_is_refused_in_the_clear(kind: type) -> None:
    state = RunState.start("run-1", RunRequest(goal="g"), datetime.now(UTC))
    made: dict[Any, BaseModel] = {
        RunResult: RunResult(run_id="run-1", status="completed"),
        RunState: state,
        RunSummary: RunSummary.of(state),
    }
    value = made[kind]
    clear = await as_worker_reads(value, sealed=False)
    with pytest.raises(ApplicationError, match="not sealed with the deployment's key"):
        PLAIN.from_payloads([clear], [kind])
    [read] = PLAIN.from_payloads([await as_worker_reads(value, sealed=True)], [kind])
    assert isinstance(read, kind)


async def test_an_agent_runs_activity_payloads_must_be_sealed() -> None:
    clear = await as_worker_reads({"amount": 80}, sealed=False)
    agent_run = PLAIN.with_context(activity_of("AgentWorkflow"))
    with pytest.raises(ApplicationError, match=r"run_tool of run run-1 .* not sealed"):
        agent_run.from_payloads([clear], [dict])
    assert agent_run.from_payloads([await as_worker_reads({"amount": 80}, sealed=True)], [dict])
    # A team's own workflow's activities, and a workflow's own inputs, may come in the clear.
    assert PLAIN.with_context(activity_of("Billing")).from_payloads([clear], [dict])
    workflow = PLAIN.with_context(WorkflowSerializationContext(namespace="d", workflow_id="w"))
    assert workflow.from_payloads([clear], [dict])


async def test_a_worker_without_keys_marks_nothing_and_refuses_nothing() -> None:
    [payload] = PLAIN.to_payloads([RunResult(run_id="run-1", status="completed")])
    assert SEALED_WITH not in payload.metadata
    [read] = PLAIN.with_context(activity_of("AgentWorkflow")).from_payloads([payload], [RunResult])
    assert read.run_id == "run-1"
