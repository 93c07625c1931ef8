"""Users' tools at work: a tool that raises, an async tool with its context, and an agent
with its own model endpoint and key."""

from __future__ import annotations

import json
import urllib.request
from datetime import timedelta

import pytest
from temporalio.common import RetryPolicy

from durable_agents import Agent, Model, ToolContext, ToolRisk, tool
from durable_agents.control import runs
from durable_agents.control.runs import RunError
from durable_agents.infra.offline_model.server import key_digest
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.registry import AgentRegistry
from tests.conftest import run_id

ATTEMPTS: list[int] = []
SEEN: list[ToolContext] = []


@tool(
    risk=ToolRisk.SIDE_EFFECT,
    retry=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=10)),
)
async def flaky_charge(ctx: ToolContext, amount: int) -> dict[str, int]:
    """Charge a card; the card network is down."""
    ATTEMPTS.append(ctx.attempt)
    raise ConnectionError("card network unreachable")


@tool
async def whoami(ctx: ToolContext) -> str:
    """Say which call this is."""
    SEEN.append(ctx)
    ctx.heartbeat("still here")
    return f"step {ctx.step}, key {ctx.idempotency_key}"


cashier = Agent(
    name="cashier", instructions="Charge.", tools=[flaky_charge, whoami], planning=False
)


async def test_a_tool_that_keeps_failing_is_an_error_the_model_reads(time_env):
    model = ScriptedModel(
        [call("flaky_charge", amount=5), call("whoami"), say("Could not charge.")]
    )
    async with AgentTestbed(cashier, model=model, env=time_env) as bed:
        run = await bed.start("cashier", "Charge 5")
        result = await run.result()
        state = await run.state()
    assert result.status == "completed" and result.final_answer == "Could not charge."
    assert ATTEMPTS == [1, 2, 3]  # the tool's own retry policy, then the model hears it
    told = model.requests[1].messages[-1]["content"]
    assert told.startswith("error: flaky_charge failed: ConnectionError: card network")
    assert [(r.tool, r.ok) for r in state.results] == [("flaky_charge", False), ("whoami", True)]
    assert result.effects is not None and result.effects.total == 0  # nothing was charged
    [ctx] = SEEN
    assert ctx.run_id == state.store_key and ctx.step == 1 and ctx.idempotency_key is None
    assert model.requests[2].messages[-1]["content"] == "step 1, key None"


def served_keys(base_url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{base_url}/scripted/stats") as response:
        totals = json.loads(response.read())["totals"]
    return {k: v for k, v in totals.items() if k.startswith("key_")}


async def test_an_agent_talks_to_its_own_endpoint_with_its_own_key(
    dev_env, settings, model_server, monkeypatch
):
    monkeypatch.setenv("SUPPORT_MODEL_KEY", "sk-support-own-key")
    own = Agent(
        name="own-model",
        instructions="Answer.",
        planning=False,
        model=Model(
            "support-model", base_url=model_server.base_url, api_key_env="SUPPORT_MODEL_KEY"
        ),
    )
    digest = f"key_{key_digest('sk-support-own-key')}"
    before = served_keys(model_server.base_url).get(digest, 0)
    rid = run_id("own-model")
    async with build_worker(dev_env.client, settings, registry=AgentRegistry().add(own)):
        request = RunRequest(goal="hello", agent="own-model", label="refund-loop")
        await runs.start_run(dev_env.client, settings, request, rid)
        result = await runs.wait_result(dev_env.client, rid)
    assert result.status == "completed"
    assert served_keys(model_server.base_url).get(digest, 0) > before


async def test_a_tools_declared_approvers_hold_whatever_the_runs_policy_names(time_env):
    """A policy may name fewer of a tool's declared approvers, never others: "boss" in
    place of "support-lead" is refused before anything starts."""
    from durable_agents import RunPolicy
    from tests.agents.support_desk import support_desk

    refund = call("refund_order", order_id="A-1001", amount="20.00")
    async with AgentTestbed(support_desk, model=ScriptedModel([refund, say("ok")])) as bed:
        with pytest.raises(RunError, match=r"approvers of refund_order must be among \['support"):
            await bed.start(
                "support-desk", "Refund", policy=RunPolicy(approvers={"refund_order": ["boss"]})
            )
        default = await bed.start("support-desk", "Refund A-1001")
        other = RunPolicy(approve_all_side_effects=True)
        named = await bed.start("support-desk", "Refund A-1001", policy=other)
        await default.next_approval()
        await named.next_approval()
        assert (await default.state()).policy.approvers == {"refund_order": ["support-lead"]}
        assert (await named.state()).policy.approvers == {"refund_order": ["support-lead"]}
        with pytest.raises(RunError, match="boss may not decide refund_order"):
            await named.approve(by="boss")
        assert (await named.state()).pending_approvals  # refused: nothing changed
