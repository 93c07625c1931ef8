"""Every way a run comes about (workflows/admission.py, ADMISSION) met with a hostile
start through a plain Temporal client: each refused in one line, before any activity but
the admission's own has been scheduled, nothing paid. The rows are the table's own: a
way added without an attack here fails `test_every_beginning_has_a_hostile_start`.

A cron runs every 2 s; a retry run follows a first run failed on someone's worker.
Everything runs on the dev server."""

from __future__ import annotations

import asyncio
import base64
import resource
import tempfile
import uuid
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import ResetReapplyExcludeType
from temporalio.api.workflowservice.v1 import (
    DeleteWorkflowExecutionRequest,
    ResetWorkflowExecutionRequest,
)
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.control import memory, runs, timeline
from durable_agents.control.signer import read_signer, write_new_key
from durable_agents.runtime.settings import Settings, SubjectKeySetting
from durable_agents.worker.main import build_worker
from durable_agents.workflows.admission import ADMISSION, Beginning
from durable_agents.workflows.contracts import DelegatedBy, ForkSpec, RunPolicy, RunRequest
from durable_agents.workflows.packing import pack_state
from durable_agents.workflows.people_inputs import Actor
from durable_agents.workflows.state import RunState
from durable_agents.workflows.whatif import ShadowSpec
from tests.conftest import arrange, run_id, settings_for
from tests.integration.test_outside_callers import (
    FakeParent,
    Smuggled,
    Smuggler,
    journal,
)

# What the admission itself may schedule before it refuses; nothing else may run.
ADMISSION_ACTIVITIES = {"run_origin", "fork_origin", "parent_state_at", "scheduled_run"}
JANE = {"customer": "jane"}
REFUND = RunRequest(goal="Refund jane 80 EUR", agent="refund", label="refund-loop")


def carried(wid: str, **request: Any) -> RunRequest:
    """A start carrying a state an attacker made: no policy, no identity."""
    state = RunState.start(wid, REFUND, datetime.now(UTC))
    arrange(state, policy=RunPolicy())
    return REFUND.model_copy(update={"resume_state_packed": pack_state(state), **request})


@dataclass
class Refused:
    wid: str
    said: list[str]  # each run's failure, first run first
    acted: set[str]  # the activity types the runs scheduled


async def chain_of(client: Client, wid: str) -> Refused:
    """Every run of the workflow id, from the newest back along its chain."""
    said: list[str] = []
    acted: set[str] = set()
    run: str | None = (await client.get_workflow_handle(wid).describe()).run_id
    while run:
        history = await client.get_workflow_handle(wid, run_id=run).fetch_history()
        run = None
        for event in history.events:
            if event.HasField("workflow_execution_started_event_attributes"):
                run = event.workflow_execution_started_event_attributes.continued_execution_run_id
            if event.HasField("activity_task_scheduled_event_attributes"):
                acted.add(event.activity_task_scheduled_event_attributes.activity_type.name)
            if event.HasField("workflow_execution_failed_event_attributes"):
                said.insert(0, event.workflow_execution_failed_event_attributes.failure.message)
    return Refused(wid, said, acted)


async def refused(client: Client, wid: str) -> Refused:
    await until(lambda: exists(client, wid))  # a child is started by its parent's task
    with pytest.raises(WorkflowFailureError):
        await asyncio.wait_for(client.get_workflow_handle(wid).result(), timeout=120)
    return await chain_of(client, wid)


async def start(client: Client, settings: Settings, request: RunRequest, **options: Any) -> str:
    wid = options.pop("id", None) or run_id("hostile")
    await client.start_workflow(
        "AgentWorkflow", request, id=wid, task_queue=settings.task_queue, **options
    )
    return wid


# -- one hostile start per beginning ------------------------------------------------------


async def fresh(env: Envs) -> Refused:
    """A fresh start carrying a state."""
    wid = run_id("fresh")
    await start(env.dev.client, env.settings, carried(wid), id=wid)
    return await refused(env.dev.client, wid)


async def continued(env: Envs) -> Refused:
    """Someone else's workflow continuing as new into ours with a state of its making."""
    wid, queue = run_id("smuggled"), f"smuggler-{uuid.uuid4().hex[:8]}"
    async with Worker(
        env.dev.client, task_queue=queue, workflows=[Smuggler],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):  # fmt: skip
        smuggled = Smuggled(env.settings.task_queue, carried(wid))
        await env.dev.client.start_workflow(Smuggler.run, smuggled, id=wid, task_queue=queue)
        return await refused(env.dev.client, wid)


async def cron(env: Envs) -> Refused:
    """A cron start carrying a state: its first run is refused, and the cron's next run
    (which Temporal says continues the first) carries the same state."""
    client, wid = env.dev.client, run_id("cron")
    await start(client, env.settings, carried(wid), id=wid, cron_schedule="@every 2s")
    await until_failed(client, wid, 2)
    await client.get_workflow_handle(wid).terminate("the test has seen two runs")
    return await chain_of(client, wid)


@workflow.defn(name="AgentWorkflow", sandboxed=False)
class FailsOnce:
    """Someone's worker on the queue for one run: it fails, and Temporal retries."""

    @workflow.run
    async def run(self, request: RunRequest) -> None:
        raise ApplicationError("try again")


async def retry(env: Envs) -> Refused:
    """A start carrying a state, with a retry policy: its first run fails (on someone's
    worker), and Temporal's retry run, on ours, carries the same state."""
    client, wid = env.dev.client, run_id("retry")
    queue = settings_for(client, env.tmp / "retry", env.settings.offline_model_port)
    once = Worker(client, task_queue=queue.task_queue, workflows=[FailsOnce])
    async with once:
        await start(
            client, queue, carried(wid), id=wid,
            retry_policy=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(seconds=1)),
        )  # fmt: skip
        await until(lambda: attempts(client, wid, 1))
    async with build_worker(client, queue):
        return await refused(client, wid)


async def attempts(client: Client, wid: str, count: int) -> bool:
    """Whether `count` runs of the workflow id have failed."""
    return len((await chain_of(client, wid)).said) >= count


async def child(env: Envs, delegated: bool = True) -> Refused:
    """Someone else's workflow, on its own queue, starting our agent as its child with an
    empty policy (a sub-agent takes its parent's)."""
    wid, queue = run_id("fake-parent"), f"fake-parent-{uuid.uuid4().hex[:8]}"
    request = REFUND.model_copy(
        update={
            "policy": RunPolicy(),
            "delegated_by": DelegatedBy(run_id=wid, step=1, tool_call_id="c1", agent="triage")
            if delegated
            else None,
        }
    )
    async with Worker(
        env.dev.client, task_queue=queue, workflows=[FakeParent],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):  # fmt: skip
        smuggled = Smuggled(env.settings.task_queue, request)
        await env.dev.client.start_workflow(FakeParent.run, smuggled, id=wid, task_queue=queue)
        return await refused(env.dev.client, f"{wid}-child")


async def run_agent(env: Envs) -> Refused:
    return await child(env, delegated=False)


async def fork(env: Envs) -> Refused:
    """A fork naming a parent Temporal does not have."""
    ghost = run_id("ghost")
    state = RunState.start(ghost, REFUND, datetime.now(UTC))
    request = REFUND.model_copy(
        update={"fork": ForkSpec(parent_run_id=ghost, state=state.model_dump(mode="json"))}
    )
    wid = await start(env.dev.client, env.settings, request)
    return await refused(env.dev.client, wid)


async def shadow(env: Envs) -> Refused:
    """A what-if shadow started on a production queue (its decisions would be its own)."""
    request = REFUND.model_copy(update={"shadow": ShadowSpec(unmatched="approve")})
    wid = await start(env.dev.client, env.settings, request)
    return await refused(env.dev.client, wid)


async def scheduled(env: Envs) -> Refused:
    """A run about a customer whose grant names a Schedule that never started it, on a
    deployment that says who may start runs about whom (AGENT_SUBJECT_KEYS)."""
    keys = Path(tempfile.mkdtemp())
    public = write_new_key(keys / "ops.key")
    keyed = settings_for(env.dev.client, keys / "data", env.settings.offline_model_port)
    namespaces = {"ops": SubjectKeySetting(public_key=public, namespaces=["customer/*"])}
    keyed = keyed.model_copy(update={"subject_keys": namespaces})
    grant = read_signer(keys / "ops.key", "ops").subject_grant(
        f"schedule:{run_id('nightly')}", JANE
    )
    request = RunRequest(
        goal="Check jane's account", agent="support-chat", subject=JANE, subject_grant=grant
    )
    async with build_worker(env.dev.client, keyed):
        wid = await start(env.dev.client, keyed, request)
        found = await refused(env.dev.client, wid)
    assert memory.listing(keyed, "customer/jane") == []
    return found


@dataclass
class Envs:
    dev: WorkflowEnvironment
    settings: Settings
    tmp: Path


ATTACKS: dict[Beginning, tuple[Callable[[Envs], Awaitable[Refused]], str]] = {
    Beginning.FRESH: (fresh, "refused: a start request may not carry a run's state"),
    Beginning.CONTINUED: (continued, "continued as new from a Smuggler"),
    Beginning.CRON: (cron, "refused: a cron run is never a continuation"),
    Beginning.RETRY: (retry, "refused: a retry run is never a continuation"),
    Beginning.CHILD: (child, "started by a FakeParent on"),
    Beginning.RUN_AGENT: (run_agent, "started by a FakeParent on"),
    Beginning.FORK: (fork, "does not exist"),
    Beginning.SHADOW: (shadow, "refused: a what-if shadow runs only on a what-if task queue"),
    Beginning.SCHEDULED: (scheduled, "not this run"),
}


def test_every_beginning_has_a_hostile_start() -> None:
    assert set(ATTACKS) == set(Beginning) == set(ADMISSION)


@pytest.mark.parametrize("beginning", list(Beginning))
async def test_a_hostile_start_of_each_beginning_is_refused(
    beginning: Beginning,
    dev_env: WorkflowEnvironment,
    settings: Settings,
    worker: Any,
    tmp_path: Path,
) -> None:
    attack, expected = ATTACKS[beginning]
    paid_before = len(journal(settings))
    found = await attack(Envs(dev_env, settings, tmp_path))
    last = found.said[-1] if found.said else ""
    assert expected in last, found.said
    ours = found.said[1:] if beginning is Beginning.RETRY else found.said  # 1st: someone's
    assert all(said.startswith("refused:") and "\n" not in said for said in ours), ours
    assert found.acted <= ADMISSION_ACTIVITIES, found.acted
    assert len(journal(settings)) == paid_before


async def test_a_cron_run_after_the_first_is_refused_as_a_continuation(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any, tmp_path: Path
) -> None:
    """The issue's attack in full: the first run of the cron is refused as a start that
    carries a state, and the next (Temporal calls it a continuation) by the admission."""
    found = await cron(Envs(dev_env, settings, tmp_path))
    assert found.said[0] == "refused: a start request may not carry a run's state (resume_state)"
    assert found.said[1].startswith("refused: a cron run is never a continuation")
    assert journal(settings) == []


@pytest.mark.parametrize("door", ["start", "continue-as-new"])
async def test_an_inflating_start_input_is_refused_with_the_workers_memory_flat(
    door: str, dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    """1.36 MB of packed state that inflates to a gigabyte, by a start and by someone's
    continue-as-new into ours: refused in one line, and the worker (in this process)
    never held it."""
    deflate = zlib.compressobj(9)
    zeros = bytes(1 << 20)
    packed = b"".join(deflate.compress(zeros) for _ in range(1000)) + deflate.flush()
    request = REFUND.model_copy(update={"resume_state_packed": base64.b64encode(packed).decode()})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB, the high-water mark
    wid, queue = run_id("inflating"), f"smuggler-{uuid.uuid4().hex[:8]}"
    if door == "start":
        await start(dev_env.client, settings, request, id=wid)
        found = await refused(dev_env.client, wid)
        assert found.said == ["refused: a start request may not carry a run's state (resume_state)"]
    else:
        async with Worker(
            dev_env.client, task_queue=queue, workflows=[Smuggler],
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):  # fmt: skip
            smuggled = Smuggled(settings.task_queue, request)
            await dev_env.client.start_workflow(Smuggler.run, smuggled, id=wid, task_queue=queue)
            found = await refused(dev_env.client, wid)
        assert found.said[-1].startswith("refused: the carried state cannot be read: "), found
        assert "inflates past" in found.said[-1]
    assert found.acted == set()
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 200, grown_mib


async def exists(client: Client, wid: str, run: str | None = None) -> bool:
    try:
        await client.get_workflow_handle(wid, run_id=run).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def until_failed(client: Client, wid: str, count: int) -> None:
    await until(lambda: attempts(client, wid, count))


async def until(check: Callable[[], Awaitable[bool]], within: float = 90.0) -> None:
    for _ in range(int(within / 0.2)):
        if await check():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"not met within {within}s")


@workflow.defn(name="LeavingParent", sandboxed=False)
class LeavingParent:
    """Starts our agent as its child with an empty policy, and leaves at once."""

    @workflow.run
    async def run(self, smuggled: Smuggled) -> None:
        await workflow.start_child_workflow(
            "AgentWorkflow",
            smuggled.request,
            id=f"{workflow.info().workflow_id}-child",
            task_queue=smuggled.queue,
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
        )


async def delete(client: Client, wid: str, run: str | None = None) -> None:
    """As `temporal workflow delete` (or Temporal's retention) does."""
    await client.workflow_service.delete_workflow_execution(
        DeleteWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=wid, run_id=run or ""),
        )
    )


async def test_a_child_whose_parent_was_deleted_is_refused(
    dev_env: WorkflowEnvironment, settings: Settings
) -> None:
    """A stranger's workflow starts our refund agent as its child with an empty policy and
    deletes itself before our worker sees the child: its parent cannot be shown, so the
    child is refused, and the unsigned budget raise sent to it changes nothing."""
    client = dev_env.client
    wid, queue = run_id("leaving"), f"leaving-{uuid.uuid4().hex[:8]}"
    delegated = DelegatedBy(run_id=wid, step=1, tool_call_id="c1", agent="triage")
    request = REFUND.model_copy(update={"policy": RunPolicy(), "delegated_by": delegated})
    async with Worker(client, task_queue=queue, workflows=[LeavingParent]):
        await client.execute_workflow(
            LeavingParent.run, Smuggled(settings.task_queue, request), id=wid, task_queue=queue
        )
    await delete(client, wid)
    await until(lambda: gone(client, wid))
    child = f"{wid}-child"
    await client.get_workflow_handle(child).signal(
        "raise_budget", runs.budget_raise("mallory", usd=1_000_000)
    )
    async with build_worker(client, settings):
        found = await refused(client, child)
    # Refused by the caller check of the admission's own activity, or by the admission.
    said = found.said[-1]
    assert said.startswith("refused: ") and f"{wid}" in said, found
    assert "no longer shows" in said or "cannot be shown" in said, said
    assert "agentctl fork" in said
    assert found.acted <= ADMISSION_ACTIVITIES
    assert journal(settings) == []


async def gone(client: Client, wid: str, run: str | None = None) -> bool:
    return not await exists(client, wid, run)


async def test_a_chain_whose_earlier_run_is_gone_is_refused_and_a_fork_goes_on(
    dev_env: WorkflowEnvironment, settings: Settings
) -> None:
    """Temporal's retention removed the run a long chain continued from (deleted here): a
    worker that had not checked the chain refuses the run's next activity, never taking
    it as "checked back then"; the operator forks the run from its last moment, as the
    refusal says, and the fork goes on to its end."""
    client, rid = dev_env.client, run_id("long-chain")
    async with build_worker(client, settings):
        await continued_and_paused(client, settings, rid, steps=30)
    [first, *_] = await timeline.chain_runs(client, rid)
    current = (await client.get_workflow_handle(rid).describe()).run_id
    assert first.run != current
    await delete(client, rid, first.run)
    await until(lambda: gone(client, rid, first.run))
    async with build_worker(client, settings):  # a worker that never checked the chain
        await runs.resume(client, rid, Actor(by="ops"))
        outcome = await runs.wait_for_outcome(client, rid)
        assert outcome["status"] == "failed", outcome
        assert "which Temporal no longer shows" in outcome["error"], outcome
        assert "agentctl fork" in outcome["error"]
        last = (await timeline.rebuild(client, rid, states=False)).moments[-1].index
        fork = await timeline.fork(client, settings, rid, last)
        done = await runs.wait_for_outcome(client, fork.run_id)
        assert done["status"] == "completed", done


@pytest.mark.parametrize("odd", ["victim-r1@01a2", "two\nlines", "../../etc", "a/b", "-x"])
async def test_an_id_our_tools_cannot_show_is_refused_at_the_start(
    odd: str, dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    """Temporal takes these ids; `agentctl` and the console could not show, steer or
    cancel a run under them (a store key's `@`, a path, a line break): the run refuses
    itself in one line before anything, whoever started it."""
    found = await refused(dev_env.client, await start(dev_env.client, settings, REFUND, id=odd))
    [said] = found.said
    assert said.startswith("refused: run id ") and "\n" not in said, said
    assert found.acted == set()


async def test_a_continued_run_reset_to_its_first_task_is_admitted_again(
    dev_env: WorkflowEnvironment, settings: Settings, worker: Any
) -> None:
    """Temporal's reset of a continued run to its first workflow task (the Web UI's
    "reset to first workflow task") asks the admission again as a new run the previous
    run's continue-as-new did not name: the reset's own record links it, and it goes on."""
    client, rid = dev_env.client, run_id("reset-chain")
    await continued_and_paused(client, settings, rid, steps=12)
    history = await client.get_workflow_handle(rid).fetch_history()
    first_task = next(
        e.event_id for e in history.events if e.HasField("workflow_task_completed_event_attributes")
    )
    asked = [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    assert asked[0].activity_task_scheduled_event_attributes.activity_type.name == "run_origin"
    await client.workflow_service.reset_workflow_execution(
        ResetWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=rid),
            reason="reset to first workflow task",
            workflow_task_finish_event_id=first_task,
            request_id=str(uuid.uuid4()),
            reset_reapply_exclude_types=[ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL],
        )
    )
    # The pause may have been carried into this run by its continue-as-new (it continued
    # between the pause and its taking hold): resumed, it goes on either way.
    await runs.resume(client, rid, Actor(by="ops"))
    outcome = await runs.wait_for_outcome(client, rid)
    assert outcome["status"] == "completed", outcome


async def continued_and_paused(client: Client, settings: Settings, rid: str, steps: int) -> None:
    """A long run started, continued as new at least once, then paused there (a worker
    must be serving `settings`' queue)."""
    request = RunRequest.model_validate(
        {
            "goal": "long",
            "scenario": f"long?steps={steps}&reply_bytes=64",
            "limits": {"continue_as_new_after_events": 60},
        }
    )
    await runs.start_run(client, settings, request, rid)

    async def paused_after_continuing() -> bool:
        state = await runs.get_state(client, rid)
        continued = len(await timeline.chain_runs(client, rid)) > 1
        if continued and not state.pause_requested:
            await runs.pause(client, rid, Actor(by="ops"))
        return continued and state.status.value == "paused"

    await until(paused_after_continuing)
