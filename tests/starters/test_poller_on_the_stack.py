"""Both queue-poller attacks against a default `agentctl up` stack (its keys made by `up`):
the attacker's worker joins the stack's public build (DescribeWorkerDeployment) and polls
its queue while the stack's worker is stopped, hijacks a fresh run's first task into a
continue-as-new with `policy {}`, and hosts a parent that hands the refund agent `policy
{}`; the stack's worker comes back and refuses both; the provider pays nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkerDeploymentConfig

from durable_agents.infra.processes import stop
from durable_agents.infra.stack import files_for
from durable_agents.runtime import versioning
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import load_settings
from durable_agents.workflows.contracts import DelegatedBy, RunPolicy
from tests.conftest import eventually, run_id
from tests.integration.test_outside_callers import journal
from tests.integration.test_trust_keys import (
    HANDED,
    REFUND,
    Hijacker,
    ImpostorParent,
    chain_length,
    exists,
    failure,
)
from tests.starters.test_agentctl_e2e import Stack


async def attacker(
    client: Client, queue: str, build: WorkerDeploymentVersion, kind: type
) -> Worker:
    return Worker(
        client,
        task_queue=queue,
        workflows=[kind],
        workflow_runner=UnsandboxedWorkflowRunner(),
        deployment_config=WorkerDeploymentConfig(
            version=build,
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED,
        ),
    )


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    stack = Stack(tmp_path / "data")
    yield stack
    stack("down", check=False)


async def test_a_poller_of_the_stacks_queue_gets_no_refund(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack("up")
    for key, value in stack.env.items():
        if key.startswith("AGENT_"):
            monkeypatch.setenv(key, value)
    settings = load_settings()
    assert settings.encryption_on, "up made the keys"
    before = journal(settings)
    plain = await Client.connect(f"127.0.0.1:{settings.temporal_port}")  # no keys
    name = versioning.version(settings).deployment_name
    current = await versioning.current_build(plain, name)  # public, as the attacker reads it
    assert current is not None
    build = WorkerDeploymentVersion(deployment_name=name, build_id=current)
    assert stop(files_for(settings, "worker"))  # the attacker polls alone meanwhile
    queue, hijacked, parent = settings.task_queue, run_id("hijacked"), run_id("parent")

    async with await attacker(plain, queue, build, Hijacker):
        stack("run", REFUND.goal, "--agent", "refund", "--label", "refund-loop", "--id", hijacked)

        async def continued() -> bool:
            return await chain_length(plain, hijacked) >= 2

        await eventually(continued)
    HANDED[:] = [
        REFUND.model_copy(
            update={
                "policy": RunPolicy(),
                "delegated_by": DelegatedBy(run_id=parent, step=1, tool_call_id="c1", agent="t"),
            }
        )
    ]
    async with await attacker(plain, queue, build, ImpostorParent):
        await plain.start_workflow("AgentWorkflow", REFUND, id=parent, task_queue=queue)
        await eventually(lambda: exists(plain, f"{parent}-child"))

    stack("up")  # the stack's worker is back
    client = await connect(settings)
    child_said = await failure(client, f"{parent}-child")
    continued_said = await failure(client, hijacked)
    await plain.get_workflow_handle(parent).terminate("the test is over")
    assert "a sub-agent's terms (delegated_by) is taken only sealed" in child_said
    assert "a carried state (a continuation's) is taken only sealed" in continued_said
    assert journal(settings) == before
