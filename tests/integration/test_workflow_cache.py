"""A worker whose workflow cache holds fewer runs than wait on it (or none): each run it
let go replays its history on its next event and goes on as if it had never left."""

from __future__ import annotations

import pytest
from temporalio.api.enums.v1 import EventType, TaskQueueKind
from temporalio.client import Client
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig

from durable_agents.control import runs
from durable_agents.worker.main import build_worker
from durable_agents.worker.sandbox import sandbox_restrictions
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from tests.conftest import count_effects, run_id, wait_for_approval

PAY = RunRequest(goal="pay the invoice", agent="invoice", label="pay-invoice")


@pytest.mark.parametrize(("cache_size", "sandbox"), [(0, "shared"), (2, "strict"), (2, "shared")])
async def test_runs_let_go_by_a_small_cache_resume_on_their_next_event(
    dev_env, settings, cache_size, sandbox
):
    """With the workflow module shared by the cached runs (the default) or imported afresh
    in each (Temporal's strict sandbox, which fails a non-deterministic call). The worker
    reports its cache through a runtime of its own: the test proves runs were let go."""
    metrics = MetricBuffer(100_000)
    client = await Client.connect(
        dev_env.client.service_client.config.target_host,
        namespace=dev_env.client.namespace,
        data_converter=dev_env.client.data_converter,
        runtime=Runtime(telemetry=TelemetryConfig(metrics=metrics)),
    )
    small = settings.model_copy(
        update={"workflow_cache_size": cache_size, "workflow_sandbox": sandbox}
    )
    rids = [run_id("cached") for _ in range(5)]
    async with build_worker(client, small):
        for rid in rids:  # each new run pushes an older one out of a cache of 2
            await runs.start_run(client, small, PAY, rid)
            await wait_for_approval(client, rid)
        for rid in rids:
            await runs.approve(client, rid, Decision(by="alice"))
        results = [await runs.wait_result(client, rid) for rid in rids]
    assert [r.status for r in results] == ["completed"] * 5
    assert [count_effects(small, rid, "charge") for rid in rids] == [1] * 5
    if cache_size == 0:  # the setting reached the worker: no run was kept, none sticky
        assert not any([await went_sticky(client, rid) for rid in rids])
    else:  # five runs waited on a cache of two: three at least were pushed out, and each
        # came back through a task the cache missed (a replay of its history)
        counted = cache_counts(metrics)
        assert counted["temporal_sticky_cache_total_forced_eviction"] >= len(rids) - cache_size
        assert counted["temporal_sticky_cache_miss"] >= len(rids) - cache_size


def cache_counts(metrics: MetricBuffer) -> dict[str, int]:
    """The worker's cache counters as its runtime reported them (the Core SDK's names)."""
    counted = {"temporal_sticky_cache_total_forced_eviction": 0, "temporal_sticky_cache_miss": 0}
    for update in metrics.retrieve_updates():
        if update.metric.name in counted:
            counted[update.metric.name] += int(update.value)
    return counted


async def went_sticky(client, rid: str) -> bool:
    """A workflow task went to the worker that held the run (its sticky queue)."""
    history = await client.get_workflow_handle(rid).fetch_history()
    return any(
        e.workflow_task_scheduled_event_attributes.task_queue.kind
        == TaskQueueKind.TASK_QUEUE_KIND_STICKY
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
    )


def test_the_shared_sandbox_passes_the_workflow_module_through_and_strict_does_not(settings):
    shared = sandbox_restrictions(settings.model_copy(update={"workflow_sandbox": "shared"}))
    strict = sandbox_restrictions(settings.model_copy(update={"workflow_sandbox": "strict"}))
    assert AgentWorkflow.__module__ in shared.passthrough_modules
    assert AgentWorkflow.__module__ not in strict.passthrough_modules
    assert "durable_agents.workflows.faults" in strict.passthrough_modules
