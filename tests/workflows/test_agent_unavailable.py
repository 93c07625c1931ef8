"""A worker whose tool takes other arguments than the run recorded is not the worker for
that run: AgentUnavailable (the workflow task fails and waits for one that has the tool
as it was), never a call with arguments the tool no longer means."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from durable_agents import CallToReview, Verdict
from durable_agents.client import AgentClient
from durable_agents.testing import ScriptedModel, call, say
from durable_agents.worker.main import build_worker
from durable_agents.workflows.agents import Agent
from durable_agents.workflows.registry import AgentRegistry, AgentUnavailable
from durable_agents.workflows.tools import ToolRisk, tool
from tests.conftest import eventually, settings_for


@tool(risk=ToolRisk.SIDE_EFFECT)
def refund(order_id: str, amount: str) -> dict[str, str]:
    """Refund an order."""
    return {"refunded": order_id}


def agent_with(*tools) -> Agent:
    return Agent(name="desk", instructions="Refund.", tools=list(tools), planning=False)


def test_a_changed_argument_schema_is_not_the_recorded_tool():
    recorded = agent_with(refund).record()
    [record] = [t for t in recorded.tools if t.name == "refund"]

    @tool(risk=ToolRisk.SIDE_EFFECT, name="refund")
    def refund_v2(order_id: str, amount_cents: int) -> dict[str, str]:
        """Refund an order, in cents now."""
        return {"refunded": order_id}

    same = AgentRegistry().add(agent_with(refund))
    assert same.tool_for(record, "desk").name == "refund"
    changed = AgentRegistry().add(agent_with(refund_v2))
    with pytest.raises(AgentUnavailable, match="takes other arguments than when the run"):
        changed.tool_for(record, "desk")
    gone = AgentRegistry().add(agent_with())
    with pytest.raises(AgentUnavailable, match="has no tool 'refund'"):
        gone.tool_for(record, "desk")


def no_offshore(review: CallToReview) -> Verdict | None:
    if review.arguments.get("account", "").startswith("KY"):
        return Verdict.deny("offshore accounts are not allowed")
    return None


@tool(risk=ToolRisk.SIDE_EFFECT)
def transfer(account: str, amount: str) -> dict[str, str]:
    """Transfer money to an account."""
    TRANSFERRED.append(account)
    return {"sent": amount, "to": account}


TRANSFERRED: list[str] = []


def treasurer(*rules) -> Agent:
    return Agent(
        name="treasurer",
        instructions="Move money as told.",
        tools=[transfer],
        planning=False,
        rules=list(rules),
    )


async def test_a_worker_without_the_runs_rule_leaves_the_run_waiting_for_one_with_it(
    dev_env, model_server, tmp_path
):
    """The run recorded the rule no_offshore; a deploy brought a worker whose agent lost it.
    That worker fails the workflow task (AgentUnavailable) instead of moving money unchecked;
    the run waits, and a worker with the rule goes on from there: the rule denies."""
    client, TRANSFERRED[:] = dev_env.client, []
    settings = settings_for(client, tmp_path / "data", model_server.port, versioning=False)
    model = ScriptedModel(
        [call("ask_human", question="Which account?"), call("transfer", account="KY-9",
         amount="10"), say("Not sent.")]
    )  # fmt: skip
    with_rule = AgentRegistry().add(treasurer(no_offshore))
    agents = AgentClient(client, settings, with_rule)
    async with build_worker(client, settings, registry=with_rule, model_clients=lambda s, m: model):
        run = await agents.start("treasurer", "Pay what the person says")
        question = await run.next_question()
    without_rule = AgentRegistry().add(treasurer())
    async with build_worker(
        client, settings, registry=without_rule, model_clients=lambda s, m: model
    ):
        await run.answer("KY-9", by="alice", question_id=question.question_id)
        failure = await eventually(lambda: task_failure(client, run.run_id), within=60)
        assert "has no approval rule 'no_offshore'" in failure
        description = await client.get_workflow_handle(run.run_id).describe()
        assert description.status == WorkflowExecutionStatus.RUNNING
    assert TRANSFERRED == []
    async with build_worker(client, settings, registry=with_rule, model_clients=lambda s, m: model):
        # Bounded: a run the worker with the rule could not take would wait for ever.
        result = await asyncio.wait_for(run.result(), timeout=120)
        state = await run.state()
    assert result.status == "completed" and TRANSFERRED == []
    verdicts = [e.detail for e in state.audit if e.action == "verdict"]
    assert verdicts == ["transfer: deny: offshore accounts are not allowed"]


async def task_failure(client: Client, rid: str) -> str | None:
    """The message of the run's first failed workflow task, once there is one."""
    history = await client.get_workflow_handle(rid).fetch_history()
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            return str(event.workflow_task_failed_event_attributes.failure.message)
    return None
