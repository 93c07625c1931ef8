"""DurableAgentsPlugin given no agent: `agents=[]` is the README's start-only client, so
it is accepted there and still starts runs; a worker given it (through its client or its
own plugins) is refused in one line at its construction, instead of polling with an
agent workflow that no agent of it can answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from durable_agents import Agent, AgentRegistry, DurableAgentsPlugin, PluginError, Settings
from durable_agents.client import AgentClient
from durable_agents.control import runs

# Every way of saying "no agent" the constructor takes.
NO_AGENTS: dict[str, Sequence[Agent] | AgentRegistry] = {
    "empty list": [],
    "empty tuple": (),
    "empty registry": AgentRegistry(),
}
REFUSAL = (
    "DurableAgentsPlugin was given no agent: agents=[] is for a client that only starts "
    "and reads runs; give the worker's plugin the agents it serves (agents=[...], or None "
    "for AGENT_MODULES), or build this worker on a client without it"
)


async def connect(env: Any, plugins: list[Any]) -> Client:
    return await Client.connect(
        env.client.service_client.config.target_host,
        namespace=env.client.namespace,
        plugins=plugins,
        runtime=env.client.config().get("runtime"),
    )


@pytest.mark.parametrize("agents", NO_AGENTS.values(), ids=NO_AGENTS.keys())
async def test_a_worker_given_no_agent_is_refused_in_one_line(dev_env, settings, agents):
    client = await connect(dev_env, [DurableAgentsPlugin(agents, settings=settings)])
    with pytest.raises(PluginError) as through_client:
        Worker(client, task_queue=settings.task_queue)
    plain = await connect(dev_env, [])
    with pytest.raises(PluginError) as as_its_own:
        Worker(
            plain,
            task_queue=settings.task_queue,
            plugins=[DurableAgentsPlugin(agents, settings=settings)],
        )
    assert str(through_client.value) == str(as_its_own.value) == REFUSAL
    assert "\n" not in REFUSAL


@pytest.mark.usefixtures("worker")
async def test_the_start_only_client_still_starts_runs(dev_env, settings: Settings):
    """The README's starter: its client's plugin has no agent, and the run it starts is
    served by the worker that has them."""
    client = await connect(dev_env, [DurableAgentsPlugin([], settings=settings)])
    run = await AgentClient(client, settings).start("invoice", "Look up invoice INV-1001")
    await run.cancel(by="test", reason="started is all this test needs")
    assert (await runs.wait_result(client, run.run_id)).status == "cancelled"
