"""A shadow cannot be turned on production: anyone who reaches Temporal can send a start
request with a `shadow` spec (whose approvals decide themselves), and the plain `temporal`
CLI does so here; the run is refused before anything is asked or paid. A plain run sent to
a what-if queue is refused too, a production worker refuses a shadow's tool call outright,
and every bad input of `agentctl whatif` is one line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from durable_agents.activities.crash_points import CrashPoints
from durable_agents.activities.shadow import Recordings
from durable_agents.activities.stores import Stores
from durable_agents.activities.tools import ToolActivities
from durable_agents.client import AgentClient
from durable_agents.control import whatif_record
from durable_agents.control.whatif import Variant, WhatIfOptions, what_if
from durable_agents.infra.stack import settings_env
from durable_agents.runtime.settings import Settings
from durable_agents.worker.shadow import build_shadow_worker
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.whatif import RecordedDecision, ShadowSpec
from tests.conftest import (
    EXAMPLE_AGENTS,
    approve_when_asked,
    count_effects,
    pay_invoice_call,
    run_id,
)
from tests.starters.test_verb_walk import agentctl, assert_one_error_line
from tests.temporal_cli import temporal

APPROVED_PAYMENT = RecordedDecision(
    tool="pay_invoice",
    arguments={"invoice_id": "INV-1001", "amount": "1250.00", "currency": "EUR"},
    approved=True,
    by="alice",
)


async def test_a_shadow_sent_to_production_with_the_temporal_cli_is_refused(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    rid = run_id("forged-shadow")
    request = RunRequest(
        goal="Pay invoice INV-1001",
        agent="invoice",
        label="pay-invoice",
        shadow=ShadowSpec(decisions=[APPROVED_PAYMENT]),
    )
    started = await temporal(
        dev_env.client, "workflow", "start", "--type", "AgentWorkflow",
        "--task-queue", settings.task_queue, "--workflow-id", rid,
        "--input", request.model_dump_json(),
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    with pytest.raises(WorkflowFailureError) as failed:
        await dev_env.client.get_workflow_handle(rid).result()
    assert "a what-if shadow runs only on a what-if task queue" in str(failed.value.cause)
    assert count_effects(settings, rid, "charge") == 0
    history = await dev_env.client.get_workflow_handle(rid).fetch_history()
    scheduled = [
        e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert scheduled == []  # no model call, no tool call, no approval asked: nothing ran


async def test_a_plain_run_on_a_what_if_queue_is_refused(
    dev_env: WorkflowEnvironment, settings: Settings
) -> None:
    queue = "whatif-isolation-test"
    recordings = Recordings(calls={})
    async with build_shadow_worker(dev_env.client, settings, EXAMPLE_AGENTS, recordings, queue):
        handle = await dev_env.client.start_workflow(
            AgentWorkflow.run,
            RunRequest(goal="Pay invoice INV-1001", agent="invoice", label="pay-invoice"),
            id=run_id("plain-on-whatif"),
            task_queue=queue,
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 60)
    assert "a what-if task queue runs only what-if shadows" in str(failed.value.cause)
    assert recordings.made == {}


async def test_a_shadow_the_what_if_did_not_start_gets_nothing_from_its_worker(
    dev_env: WorkflowEnvironment, settings: Settings
) -> None:
    """Anyone who can list workflows sees a what-if's queue: a shadow they start there is
    refused by its worker's activities (no model call on the operator's key, no tool, no
    memo of the recorded runs), while the what-if's own shadow is served."""
    queue = "whatif-intruder-test"
    recordings = Recordings(calls={})
    request = RunRequest(
        goal="Pay invoice INV-1001",
        agent="invoice",
        label="pay-invoice",
        shadow=ShadowSpec(decisions=[APPROVED_PAYMENT]),
    )
    async with build_shadow_worker(dev_env.client, settings, EXAMPLE_AGENTS, recordings, queue):
        intruder = await dev_env.client.start_workflow(
            AgentWorkflow.run, request, id=run_id("intruder"), task_queue=queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(intruder.result(), 60)
        own_id = run_id("own-shadow")
        recordings.starting(own_id)
        own = await dev_env.client.start_workflow(
            AgentWorkflow.run, request, id=own_id, task_queue=queue
        )
        recordings.started(own_id, own.result_run_id)
        served = await asyncio.wait_for(own.result(), 60)
        # Its id, started again once it closed, is another run: refused too.
        again = await dev_env.client.start_workflow(
            AgentWorkflow.run, request, id=own_id, task_queue=queue
        )
        with pytest.raises(WorkflowFailureError) as reused:
            await asyncio.wait_for(again.result(), 60)
    cause = failed.value.cause
    said = f"{cause} / {getattr(cause, 'cause', '')}"
    assert "refused: run intruder-" in said and "was not started by this what-if" in said, said
    assert served.status == "completed"
    assert "was not started by this what-if" in str(reused.value.cause)
    # The what-if's own shadow paid (as the record says, never for real); the intruder
    # got no further than its first activity.
    own_key = f"{own_id}@{own.result_run_id}"
    assert list(recordings.made) == [own_key] and recordings.made[own_key]


async def test_a_production_worker_refuses_a_shadows_tool_call(settings: Settings) -> None:
    tools = ToolActivities(
        Stores.open(settings),
        CrashPoints(None, settings.data_dir),
        EXAMPLE_AGENTS,
        settings.data_dir,
    )
    call = pay_invoice_call("shadow-x@1").model_copy(update={"shadow": True})
    with pytest.raises(ApplicationError) as refused:
        await ActivityEnvironment().run(tools.run_tool, call)
    assert refused.value.type == "ShadowRefused" and refused.value.non_retryable
    assert count_effects(settings, "shadow-x", "charge") == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["whatif"], "name the runs"),
        (["whatif", "r1", "--since", "a week"], "bad --since"),
        (["whatif", "r1", "--grader", "nomodule"], "bad --grader"),
        (["whatif", "r1", "--grader", "tests.whatif.graders:nothing"], "has no 'nothing'"),
        (
            ["whatif", "r1", "--agent", "durable_agents.examples.invoice:pay_invoice"],
            "not an Agent",
        ),
        (["whatif", "r1", "--unmatched", "maybe"], "bad --unmatched"),
        (["whatif", "r1", "--read-only", "sometimes"], "bad --read-only"),
        (["whatif", "r1", "--instructions", "  "], "instructions are empty"),
        (["whatif", "r1", "--instructions", "x", "--instructions-file", "f"], "not both"),
        (["whatif", "r1", "--since", "999999d"], "at most 3650 days"),
        (["whatif", "r1", "--since", "0d"], "more than nothing"),
        (["whatif", "no good id!"], "bad run id"),
    ],
)
async def test_bad_input_is_one_line(args: list[str], says: str, settings: Settings) -> None:
    result = await agentctl(settings_env(settings), *args)
    assert_one_error_line(result, args, says)


async def test_bad_runs_and_files_are_one_line(
    dev_env: WorkflowEnvironment, settings: Settings, tmp_path: Path
) -> None:
    env = settings_env(settings)
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"approve_payments_above": "lots"}))
    bogus = tmp_path / "history.json"
    bogus.write_text('{"events": []}')
    latin = tmp_path / "prompt.txt"
    latin.write_bytes("Zahlungen über 1000 €".encode("latin-1", "replace"))
    # No stores here yet (SQLite, local to a worker): said before any history is read.
    nowhere = ["whatif", "no-such-run"]
    assert_one_error_line(await agentctl(env, *nowhere), nowhere, "no store here")
    Stores.open(settings)  # the worker's stores, on its machine
    for args, says in (
        (["whatif", "no-such-run"], "no-such-run"),
        (["whatif", "--history", str(bogus)], "is not a history file of an agent run"),
        (["whatif", "r1", "--policy-file", str(policy)], "approve_payments_above"),
        (["whatif", "r1", "--instructions-file", str(latin)], "not UTF-8 text"),
        (["whatif", "--agent-runs", "invoice", "--query", "Bogus ==="], "visibility query"),
        (["whatif", "--agent-runs", "nobody-here"], "no recorded runs found"),
    ):
        assert_one_error_line(await agentctl(env, *args), args, says)


async def test_a_shadow_that_overstays_is_stopped_and_reported(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    """A variant whose model never answers in time (the offline model holds its first
    reply 60 s): the shadow is terminated at the what-if's timeout, and reported."""
    client = AgentClient(dev_env.client, settings)
    run = await client.start("invoice", "Pay invoice INV-1001", label="pay-invoice")
    await approve_when_asked(dev_env.client, run.run_id)
    await run.result()
    recorded = await whatif_record.recorded_runs(dev_env.client, settings, run_ids=[run.run_id])
    slow = Variant(model="scripted/pay-invoice?fault=plan:delay=60")
    options = WhatIfOptions(shadow_timeout_seconds=1)
    report = await what_if(
        dev_env.client, settings, recorded, slow, build_shadow_worker, options=options
    )
    [played] = report.runs
    assert played.now.error == "stopped: the shadow took longer than 1 s"
    assert played.differences  # status and answer: reported, not dropped
    handle = dev_env.client.get_workflow_handle(played.shadow_id)
    assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"run_ids": "inv-1"}, "are lists"),
        ({"history_files": "h.json"}, "are lists"),
        ({"run_ids": ["no good id!"]}, "bad run id"),
        ({"agent": "invoice", "closed_within": 7}, "is a timedelta"),
        ({"agent": "invoice", "limit": 0}, "limit is 1 to 1,000"),
        ({"read_only": "Recorded"}, "read_only is recorded or live"),
        ({"unmatched": "maybe"}, "unmatched is approve, reject or stop"),
        ({"variant": "strict"}, "is a durable_agents.whatif.Variant"),
    ],
)
async def test_the_python_client_refuses_bad_arguments_before_any_work(
    dev_env: WorkflowEnvironment, settings: Settings, arguments: dict[str, Any], says: str
) -> None:
    from durable_agents.control.runs import RunError

    client = AgentClient(dev_env.client, settings)
    with pytest.raises(RunError, match=says):
        await client.what_if(**arguments)
    assert whatif_record.Matching().asked is False


def test_a_variant_refuses_what_is_no_agent_instructions_or_model() -> None:
    from durable_agents.control.runs import RunError

    for bad in ({"instructions": 123}, {"instructions": "  "}, {"model": 5}, {"agent": "x"}):
        with pytest.raises(RunError):
            Variant(**bad)
