"""Pruning our stores: closed-and-old runs' data goes, open runs' data stays, whatever age."""

from __future__ import annotations

import json

import pytest
from temporalio.client import ScheduleActionStartWorkflow
from temporalio.common import VersioningBehavior

from durable_agents.activities.stores import Stores
from durable_agents.control import pruning, runs
from durable_agents.infra.temporal_setup import set_up_namespace
from durable_agents.workflows.activity_io import PruneRequest
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor
from durable_agents.workflows.prune import PruneWorkflow
from tests.conftest import (
    PRUNE_NOW,
    approve_when_asked,
    key_of,
    pruning_worker,
    run_id,
    wait_for_approval,
)

pytestmark = pytest.mark.usefixtures("worker")


async def stored(client, settings, rid):
    stores, key = Stores.open(settings), await key_of(client, rid)
    return len(stores.transcript.read(key)), len(stores.ledger.effects(key))


async def test_prune_removes_closed_runs_and_never_open_ones(dev_env, settings):
    client = dev_env.client
    closed, still_open = run_id("closed"), run_id("open")
    request = RunRequest(goal="pay", label="pay-invoice")
    await runs.start_run(client, settings, request, closed)
    await approve_when_asked(client, closed)
    await runs.wait_result(client, closed)
    await runs.start_run(client, settings, request, still_open)
    await wait_for_approval(client, still_open)
    before_open = await stored(client, settings, still_open)
    messages, effects = await stored(client, settings, closed)
    assert messages > 0 and effects == 3
    closed_key = await key_of(client, closed)

    recent = await pruning.prune(client, settings, "30d", dry_run=False)
    assert closed_key not in recent.pruned and recent.kept_recent >= 1

    # The worker's retention (7 days) holds whatever age a request asks for.
    with pytest.raises(runs.RunError, match="below this deployment's retention of 7 days"):
        await pruning.prune(client, settings, "0s", dry_run=False)
    async with pruning_worker(client, settings) as short:
        dry = await pruning.prune(client, short, PRUNE_NOW, dry_run=True)
        assert closed_key in dry.pruned
        assert not any(k.startswith(still_open) for k in dry.pruned)
        assert dry.rows_deleted > 0 and (await stored(client, settings, closed))[0] > 0
        done = await pruning.prune(client, short, PRUNE_NOW, dry_run=False)
    assert closed_key in done.pruned and done.rows_deleted > 0 and done.kept_open >= 1
    assert await stored(client, settings, closed) == (0, 0)
    assert (
        await stored(client, settings, still_open) == before_open
    )  # an open run, whatever its age
    # On a versioned worker, agent runs stay on their build; prune moves to the current.
    assert await behaviour(client, still_open) == VersioningBehavior.PINNED
    query = f"WorkflowType = 'PruneWorkflow' AND TaskQueue = '{settings.task_queue}'"
    prunes = [execution.id async for execution in client.list_workflows(query)]
    assert prunes and {await behaviour(client, p) for p in prunes} == {
        VersioningBehavior.AUTO_UPGRADE
    }
    await runs.cancel(client, still_open, Actor(by="t"))


async def behaviour(client, rid) -> VersioningBehavior:
    described = await client.get_workflow_handle(rid).describe()
    return VersioningBehavior(
        described.raw_description.workflow_execution_info.versioning_info.behavior
    )


def ghost_run(settings, name: str, *, old: bool) -> str:
    """Stored rows of a run Temporal does not know (its retention removed the run), last
    written now or long ago; its store key."""
    key = f"{run_id(name)}@first-run-gone"
    transcript = Stores.open(settings).transcript
    transcript.put(key, 1, {"role": "user", "content": "pay INV-1001"})
    if old:
        with transcript.db.transaction() as tx:
            tx.execute(
                "UPDATE transcript SET created_at = '2020-01-01T00:00:00+00:00' WHERE run_id = ?",
                (key,),
            )
    return key


async def test_a_prune_younger_than_the_retention_in_days_deletes_nothing(dev_env, settings):
    """AGENT_RETENTION_DAYS counts days: two days asked of a seven-day deployment is
    refused, by `agentctl prune` and by the worker whoever starts the prune."""
    old = ghost_run(settings, "ghost-old", old=True)
    with pytest.raises(runs.RunError, match="below this deployment's retention of 7 days"):
        await pruning.prune(dev_env.client, settings, "2d", dry_run=False)
    report = await dev_env.client.execute_workflow(
        PruneWorkflow.run,
        PruneRequest(older_than_seconds=2 * 86400, dry_run=False),
        id=run_id("prune-2d"),
        task_queue=settings.task_queue,
    )
    assert report.refused is not None and "retention of 7 days" in report.refused
    assert report.pruned == [] and report.rows_deleted == 0
    assert Stores.open(settings).transcript.rows_of(old) == 1


async def test_a_run_temporal_forgot_goes_only_once_its_last_write_is_old(dev_env, settings):
    """With no close time to go by, a run Temporal no longer shows is judged by our last
    write for it: its rows go only once that is older than the age asked, as a closed
    run's go only once it closed that long ago."""
    recent, old = (
        ghost_run(settings, "ghost-recent", old=False),
        ghost_run(settings, "ghost-old", old=True),
    )
    report = await pruning.prune(dev_env.client, settings, "7d", dry_run=False)
    assert old in report.pruned and recent not in report.pruned, report
    assert report.kept_recent >= 1
    transcript = Stores.open(settings).transcript
    assert (transcript.rows_of(recent), transcript.rows_of(old)) == (1, 0)


def test_ages_are_parsed_or_refused():
    assert pruning.parse_age("30d") == 30 * 86400
    assert pruning.parse_age("1.5h") == 5400
    with pytest.raises(runs.RunError, match="bad age"):
        pruning.parse_age("30 days")


async def test_namespace_set_up_sets_retention_and_the_daily_schedule(dev_env, settings):
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest

    client = dev_env.client
    await set_up_namespace(client, settings, ours=True)
    await set_up_namespace(client, settings, ours=True)  # twice is fine
    namespace = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=client.namespace)
    )
    assert namespace.config.workflow_execution_retention_ttl.seconds == 7 * 86400
    # A longer retention later: the daily prune asks for the new age (a younger one would
    # be refused by the workers, every day, deleting nothing).
    longer = settings.model_copy(update={"retention_days": 9.0})
    await set_up_namespace(client, longer, ours=True)
    again = await client.get_schedule_handle(settings.prune_schedule_id).describe()
    asked = again.schedule.action
    assert isinstance(asked, ScheduleActionStartWorkflow)
    [payload] = asked.args
    assert json.loads(payload.data)["older_than_seconds"] == 9 * 86400
    await set_up_namespace(client, settings, ours=True)
    schedule = await client.get_schedule_handle(settings.prune_schedule_id).describe()
    action = schedule.schedule.action
    assert action.workflow == "PruneWorkflow"
    assert schedule.schedule.spec.intervals[0].every.days == 1


async def test_prune_removes_memories_past_their_retention(dev_env, settings):
    """AGENT_MEMORY_RETENTION_DAYS: memories older than it go with the daily prune (a dry
    run counts them); without it they stay until forgotten."""
    from durable_agents.activities.stores import Stores
    from durable_agents.worker.main import build_worker

    kept = settings.model_copy(update={"task_queue": f"{settings.task_queue}-m"})
    store = Stores.open(settings).memory
    store.remember("customer/old", "an old fact", {}, key="k-old", run_id="r@1", step=1)
    with store.db.transaction() as tx:
        tx.execute("UPDATE memories SET created_at = '2020-01-01T00:00:00+00:00'")
    store.remember("customer/old", "a new fact", {}, key="k-new", run_id="r@1", step=2)
    client = dev_env.client
    async with build_worker(client, kept):
        assert (await pruning.prune(client, kept, "30d", dry_run=True)).memories_deleted == 0
    limited = kept.model_copy(update={"memory_retention_days": 30.0})
    async with build_worker(client, limited):
        dry = await pruning.prune(client, limited, "30d", dry_run=True)
        done = await pruning.prune(client, limited, "30d", dry_run=False)
    assert (dry.memories_deleted, done.memories_deleted) == (1, 1)
    assert [m.text for m in store.listing("customer/old")] == ["a new fact"]
