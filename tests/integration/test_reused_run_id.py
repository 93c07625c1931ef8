"""A reused run id never meets the old run's data (invariant 9): after Temporal forgets a
run, a new run under the same id pays afresh and spends its own tokens, and prune still
removes the old run's rows on its own schedule."""

from __future__ import annotations

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.activities.stores import Stores
from durable_agents.control import pruning, runs
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from tests.conftest import (
    PRUNE_NOW,
    approve_when_asked,
    count_effects,
    eventually,
    key_of,
    pruning_worker,
    run_id,
    wait_for_approval,
)

pytestmark = pytest.mark.usefixtures("worker")


async def forget(client, rid: str) -> None:
    """What retention does, now: Temporal deletes the run."""
    await client.workflow_service.delete_workflow_execution(
        DeleteWorkflowExecutionRequest(
            namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=rid)
        )
    )

    async def gone() -> bool:
        try:
            await client.get_workflow_handle(rid).describe()
        except RPCError as err:
            return err.status == RPCStatusCode.NOT_FOUND
        return False

    # The dev server deletes in the background: about half a minute here.
    await eventually(gone, within=120, interval=1.0)


async def test_a_reused_id_acts_afresh(dev_env, settings):
    client, rid = dev_env.client, run_id("reused")
    request = RunRequest(goal="pay", label="pay-invoice")
    await runs.start_run(client, settings, request, rid)
    await approve_when_asked(client, rid)
    assert (await runs.wait_result(client, rid)).status == "completed"
    old_key = await key_of(client, rid)
    assert count_effects(settings, rid, "charge") == 1

    await forget(client, rid)
    started = await runs.start_run(client, settings, request, rid)
    assert not started.attached
    await wait_for_approval(client, rid)
    new_key = await key_of(client, rid)
    assert new_key != old_key and new_key.startswith(f"{rid}@")

    # The old run's rows go on prune's schedule: kept while younger than the age, removed
    # after it; the new, open run's stay.
    recent = await pruning.prune(client, settings, "30d", dry_run=False)
    assert old_key not in recent.pruned and recent.kept_recent >= 1
    assert Stores.open(settings).ledger.effects(old_key) != []
    async with pruning_worker(client, settings) as short:
        report = await pruning.prune(client, short, PRUNE_NOW, dry_run=False)
    assert old_key in report.pruned and new_key not in report.pruned
    stores = Stores.open(settings)
    assert stores.transcript.read(old_key) == [] and stores.ledger.effects(old_key) == []
    assert stores.transcript.read(new_key) != []

    await runs.approve(client, rid, Decision(by="alice"))
    assert (await runs.wait_result(client, rid)).status == "completed"
    # A new payment at the provider, and tokens spent: neither ledger nor memo answered.
    assert count_effects(settings, rid, "charge") == 2
    usage = (await runs.get_state(client, rid)).usage
    assert usage.memoized_calls == 0 and usage.input_tokens > 0
    assert [e["tool"] for e in stores.ledger.effects(new_key)].count("pay_invoice") == 1
