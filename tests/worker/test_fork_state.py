"""A fork's parent is rebuilt from its own chain (worker/fork_state.py): a parent that does
not exist, is no agent run, or runs on another deployment's queue is refused for good."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agents.worker.fork_state import ForkStates
from durable_agents.workflows.activity_io import ParentMoment
from durable_agents.workflows.registry import AgentRegistry
from tests.conftest import run_id


async def rebuild(env: ActivityEnvironment, parent: str) -> ApplicationError:
    with pytest.raises(ApplicationError) as refused:
        await env.run(ForkStates(AgentRegistry()).parent_state_at, ParentMoment(
            parent_run_id=parent, moment=1
        ))  # fmt: skip
    assert refused.value.non_retryable
    return refused.value


async def test_a_parent_that_is_no_agent_run_of_this_queue_is_refused(dev_env):
    env = ActivityEnvironment(client=dev_env.client)  # its activities run on queue "test"
    other_type, other_queue = run_id("not-agent"), run_id("elsewhere")
    await dev_env.client.start_workflow("Invoicing", id=other_type, task_queue="test")
    await dev_env.client.start_workflow("AgentWorkflow", id=other_queue, task_queue="other")
    try:
        wrong_type = await rebuild(env, other_type)
        wrong_queue = await rebuild(env, other_queue)
        missing = await rebuild(env, run_id("nobody"))
    finally:
        for wid in (other_type, other_queue):
            await dev_env.client.get_workflow_handle(wid).terminate("test over")
    assert "is a Invoicing on 'test', not a run of this deployment" in str(wrong_type)
    assert "is a AgentWorkflow on 'other', not a run of this deployment" in str(wrong_queue)
    assert "does not exist" in str(missing)
