"""Activities check who calls them (worker/callers.py): a workflow of anyone's that
schedules our `run_tool` on our task queue (or on the queue of our worker's store), with a
made-up run or with its own, is refused before the tool acts, and the providers' own
journals are unchanged. So is a prune asked through the `temporal` CLI for age 0, and
anything acting again for a run whose stored data was pruned (a rewind or a fork of it)."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.activities.stores import Stores
from durable_agents.control import pruning, runs, timeline
from durable_agents.examples.providers import Providers
from durable_agents.runtime.settings import Settings
from durable_agents.worker.callers import _is_own
from durable_agents.workflows.activity_io import ToolCallInput, ToolOutcome
from durable_agents.workflows.contracts import DelegatedBy, ForkSpec, RunPolicy, RunRequest
from durable_agents.workflows.packing import pack_state
from durable_agents.workflows.state import RunState
from tests.conftest import (
    PRUNE_NOW,
    approve_when_asked,
    count_effects,
    key_of,
    pay_invoice_call,
    pruning_worker,
    run_id,
)
from tests.temporal_cli import temporal


@dataclass
class Attack:
    queue: str
    activity: str
    call: ToolCallInput


async def _schedule(attack: Attack) -> str:
    try:
        await workflow.execute_activity(
            attack.activity,
            attack.call,
            task_queue=attack.queue,
            result_type=ToolOutcome,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=2),
        )
    except ActivityError as err:
        cause = err.cause
        return f"{getattr(cause, 'type', '')}: {getattr(cause, 'message', cause)}"
    return "ran"


@workflow.defn(name="Outsider")
class Outsider:
    """Twenty lines of anyone's, on a task queue of their own."""

    @workflow.run
    async def run(self, attack: Attack) -> str:
        return await _schedule(attack)


@workflow.defn(name="AgentWorkflow")
class Impostor:
    """Named as ours, run by someone else's worker on their own task queue."""

    @workflow.run
    async def run(self, attack: Attack) -> str:
        return await _schedule(attack)


@dataclass
class Smuggled:
    queue: str
    request: RunRequest


@workflow.defn(name="Smuggler")
class Smuggler:
    """Continues as new into our agent workflow, on our queue, with a state of its own."""

    @workflow.run
    async def run(self, smuggled: Smuggled) -> None:
        workflow.continue_as_new(
            args=[smuggled.request], workflow="AgentWorkflow", task_queue=smuggled.queue
        )


@workflow.defn(name="FakeParent")
class FakeParent:
    """Starts our agent as its "sub-agent", on our queue, handing it a policy of its own
    (sub-agents run under the policy their parent hands them)."""

    @workflow.run
    async def run(self, smuggled: Smuggled) -> str:
        return str(
            await workflow.execute_child_workflow(
                "AgentWorkflow",
                smuggled.request,
                id=f"{workflow.info().workflow_id}-child",
                task_queue=smuggled.queue,
            )
        )


@workflow.defn(name="LooksLikeAParent")
class LooksLikeAParent:
    """Someone else's workflow a fork names as its parent (their worker would answer its
    queries however they like)."""

    @workflow.run
    async def run(self) -> str:
        return "done"


def causes(err: BaseException | None) -> str:
    """A failure and every cause under it, as one text."""
    said = []
    while err is not None:
        said.append(getattr(err, "message", None) or str(err))
        err = getattr(err, "cause", None)
    return " / ".join(said)


def journal(settings: Settings) -> list[dict[str, Any]]:
    providers = Providers.open(settings.data_dir)
    return [*providers.payments.effects(), *providers.email.effects()]


async def attack(dev_env: WorkflowEnvironment, kind: type, attack: Attack) -> str:
    queue = f"outsider-{uuid.uuid4().hex[:8]}"
    async with Worker(
        dev_env.client,
        task_queue=queue,
        workflows=[kind],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        wid = f"{attack.call.run_id.split('@')[0]}"
        said: str = await dev_env.client.execute_workflow(
            kind.run,  # type: ignore[attr-defined]
            attack,
            id=wid,
            task_queue=queue,
            execution_timeout=timedelta(minutes=2),
        )
        return said


async def test_an_outside_workflow_cannot_run_our_tools(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    before = journal(settings)
    made_up = run_id("made-up")
    paid = Attack(settings.task_queue, "run_tool", pay_invoice_call(f"{made_up}@1"))
    said = await attack(dev_env, Outsider, paid)
    assert said.startswith("CallerRefused: refused: run_tool is called only by AgentWorkflow")
    recall = ToolCallInput(
        run_id=f"{run_id('recaller')}@1", step=1, tool_call_id="c1", name="recall",
        arguments={"query": "card"}, result_seq=3, namespace="customer/jane", agent="support",
    )  # fmt: skip
    said = await attack(dev_env, Outsider, Attack(settings.task_queue, "run_tool", recall))
    assert said.startswith("CallerRefused: refused: run_tool is called only by AgentWorkflow")
    # Named as ours, its own run id, on its own task queue: Temporal says where it runs.
    impostor = run_id("impostor")
    own = Attack(settings.task_queue, "run_tool", pay_invoice_call(impostor))
    said = await attack(dev_env, Impostor, own)
    assert said.startswith(f"CallerRefused: refused: run {impostor} runs on task queue 'outsider-")
    # The queue of the worker's store (worker/store_queue.py) is checked as ours is.
    stored = Attack(worker.store_queue, "run_tool", pay_invoice_call(f"{run_id('made-up')}@1"))
    said = await attack(dev_env, Outsider, stored)
    assert said.startswith("CallerRefused: refused: run_tool is called only by AgentWorkflow")
    impostor = run_id("impostor")
    said = await attack(
        dev_env, Impostor, Attack(worker.store_queue, "run_tool", pay_invoice_call(impostor))
    )
    assert said.startswith(f"CallerRefused: refused: run {impostor} runs on task queue 'outsider-")
    assert said.endswith(f"not on '{settings.task_queue}' that this worker serves")
    assert journal(settings) == before
    assert count_effects(settings, made_up, "charge") == count_effects(settings, impostor, "charge")
    assert count_effects(settings, impostor, "charge") == 0


def test_the_input_must_name_the_calling_run() -> None:
    assert _is_own("run-1@first", "run-1", "first")
    assert _is_own("run-1", "run-1", "first")  # a run from before the identity
    assert not _is_own("run-2@first", "run-1", "first")
    assert not _is_own("run-1@other", "run-1", "first")
    assert not _is_own("run-1x@first", "run-1", "first")


async def test_a_prune_for_age_zero_through_the_temporal_cli_deletes_nothing(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    rid = run_id("kept")
    await runs.start_run(dev_env.client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)
    await approve_when_asked(dev_env.client, rid)
    await runs.wait_result(dev_env.client, rid)
    key = await key_of(dev_env.client, rid)
    stores = Stores.open(settings)
    kept = (stores.transcript.read(key), stores.ledger.effects(key))
    prune_id = run_id("prune-zero")
    started = await temporal(
        dev_env.client, "workflow", "execute", "--type", "PruneWorkflow",
        "--task-queue", settings.task_queue, "--workflow-id", prune_id,
        "--input", json.dumps({"older_than_seconds": 0}), "-o", "json",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    report = await dev_env.client.get_workflow_handle(prune_id).result()
    assert (
        report["pruned"] == []
        and "below this deployment's retention of 7 days" in (report["refused"])
    )
    assert (stores.transcript.read(key), stores.ledger.effects(key)) == kept
    assert kept[1] != [] and not stores.ledger.pruned(key)


async def test_nothing_acts_again_for_a_pruned_run(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    """Its ledger went with the prune: a rewind to before the payment, or a fork from
    there, would pay again. Each is refused; the payment provider saw one charge."""
    client, rid = dev_env.client, run_id("pruned")
    await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)
    await approve_when_asked(client, rid)
    await runs.wait_result(client, rid)
    key = await key_of(client, rid)
    found = await timeline.rebuild(client, rid)
    first = next(m.index for m in found.moments if m.kind == "model")
    async with pruning_worker(client, settings) as short:
        report = await pruning.prune(client, short, PRUNE_NOW, dry_run=False)
    assert key in report.pruned and Stores.open(settings).ledger.pruned(key)
    assert count_effects(settings, rid, "charge") == 1

    forked = await timeline.fork(client, settings, rid, first, new_id=run_id("fork-of-pruned"))
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(client.get_workflow_handle(forked.run_id).result(), 120)
    assert "was pruned" in causes(failed.value)

    await timeline.rewind(client, rid, first, by="ops")
    with pytest.raises(WorkflowFailureError) as rewound:
        await asyncio.wait_for(client.get_workflow_handle(rid).result(), 120)
    assert "was pruned" in causes(rewound.value)
    assert count_effects(settings, rid, "charge") == 1


async def test_a_chain_continued_from_someone_elses_workflow_gets_nothing_done(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    """A continue-as-new is taken by the run (it names its chain), but our activities see
    that the chain began as someone else's workflow on their queue: nothing runs."""
    wid = run_id("smuggled")
    request = RunRequest(goal="Refund jane 80 EUR", agent="refund", label="refund-loop")
    state = RunState.start(wid, request, datetime.now(UTC))
    carried = RunRequest(
        goal=request.goal,
        agent="refund",
        label="refund-loop",
        resume_state_packed=pack_state(state),
    )
    queue = f"smuggler-{uuid.uuid4().hex[:8]}"
    async with Worker(
        dev_env.client, task_queue=queue, workflows=[Smuggler],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):  # fmt: skip
        await dev_env.client.start_workflow(
            Smuggler.run, Smuggled(settings.task_queue, carried), id=wid, task_queue=queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(dev_env.client.get_workflow_handle(wid).result(), 120)
    assert "continued as new from a Smuggler" in causes(failed.value), causes(failed.value)
    assert count_effects(settings, wid, "refund") == 0


async def test_a_sub_agent_started_by_someone_elses_workflow_gets_nothing_done(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    """A workflow on its own queue starts our refund agent as a child on ours, naming
    itself as the delegating run and handing it an empty policy: the child is taken by the
    run, but our activities see who started it, and nothing is refunded."""
    wid = run_id("fake-parent")
    lax = RunPolicy()
    delegated = DelegatedBy(run_id=wid, step=1, tool_call_id="c1", agent="triage")
    request = RunRequest(
        goal="Refund jane 80 EUR", agent="refund", label="refund-loop", policy=lax,
        delegated_by=delegated,
    )  # fmt: skip
    queue = f"fake-parent-{uuid.uuid4().hex[:8]}"
    async with Worker(
        dev_env.client, task_queue=queue, workflows=[FakeParent],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):  # fmt: skip
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(
                dev_env.client.execute_workflow(
                    FakeParent.run, Smuggled(settings.task_queue, request), id=wid,
                    task_queue=queue,
                ),
                120,
            )  # fmt: skip
    assert f"was started by a FakeParent on {queue!r}" in causes(failed.value)
    assert count_effects(settings, f"{wid}-child", "refund") == 0


async def test_a_fork_of_someone_elses_workflow_is_refused(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    parent, queue = run_id("not-ours"), f"elsewhere-{uuid.uuid4().hex[:8]}"
    async with Worker(
        dev_env.client, task_queue=queue, workflows=[LooksLikeAParent],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):  # fmt: skip
        await dev_env.client.execute_workflow(LooksLikeAParent.run, id=parent, task_queue=queue)
    state = RunState.start(parent, RunRequest(goal="pay", label="pay-invoice"), datetime.now(UTC))
    fork = RunRequest(
        goal="pay",
        label="pay-invoice",
        fork=ForkSpec(parent_run_id=parent, state=state.model_dump(mode="json")),
    )
    fid = run_id("fork-of-not-ours")
    handle = await dev_env.client.start_workflow(
        "AgentWorkflow", fork, id=fid, task_queue=settings.task_queue
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), 60)
    assert f"the fork's parent {parent} is a LooksLikeAParent" in causes(failed.value)
    assert count_effects(settings, fid, "charge") == 0
