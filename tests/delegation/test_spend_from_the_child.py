"""A sub-agent's spend is read from its own run while it runs: nothing a reader of the
namespace finds (a child's start input, a history, an update's or a query's answer)
lets anyone forge it. Time-skipping server, scripted model."""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.client import (
    Client,
    DescribeWorkflowInput,
    Interceptor,
    OutboundInterceptor,
    WorkflowExecutionDescription,
)
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agents import RunBudget, RunPolicy
from durable_agents.activities.child_spend import child_spend
from durable_agents.client import RunHandle
from durable_agents.testing import AgentTestbed
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import ChildSpend, RunRequest, Spend
from durable_agents.workflows.people_inputs import BudgetRaise, StatePatch
from tests.conftest import eventually
from tests.delegation.agents import model_with_a_report, triage

FORGED = Spend(usd=999_999, tokens=10**9, tool_calls=999)
QUERIES = ("state", "summary", "events", "pending_approvals", "pending_questions")


def payloads(node: Any) -> Iterator[Any]:
    """Every JSON payload in a history's JSON form (or any part of it), decoded."""
    if isinstance(node, dict):
        meta = node.get("metadata")
        if isinstance(meta, dict) and "data" in node:
            if base64.b64decode(meta.get("encoding", "")) == b"json/plain":
                yield json.loads(base64.b64decode(node["data"]))
            return
        for value in node.values():
            yield from payloads(value)
    elif isinstance(node, list):
        for value in node:
            yield from payloads(value)


def tokens_in(value: Any) -> list[str]:
    """Every spend-report token a JSON value holds (a `report_token`, or a report's `token`)."""
    if isinstance(value, list):
        return [token for item in value for token in tokens_in(item)]
    if not isinstance(value, dict):
        return []
    found = []
    for key, item in value.items():
        if key in ("report_token", "token") and isinstance(item, str) and item:
            found.append(item)
        else:
            found += tokens_in(item)
    return found


async def _paused(handle) -> bool | None:
    return True if (await handle.state()).pause_requested else None


async def test_a_report_forged_with_what_the_childs_history_holds_changes_nothing(time_env):
    policy = RunPolicy(approve_all_side_effects=True)  # the child waits: its spend stays put
    async with AgentTestbed(triage, model=model_with_a_report(), env=time_env) as bed:
        temporal = bed.client.temporal
        run = await bed.start("triage", "Ticket 13", policy=policy)
        child = await run.next_sub_agent()
        await child.next_approval()
        # What anyone who may read the namespace reads: the child's start input.
        history = await temporal.get_workflow_handle(child.run_id).fetch_history()
        started = history.to_json_dict()["events"][0]["workflowExecutionStartedEventAttributes"]
        [request] = list(payloads(started["input"]))
        token = request["delegated_by"].get("report_token")
        forged = ChildSpend(child_id=child.run_id, spent=FORGED, token=token)
        await temporal.get_workflow_handle(run.run_id).signal("child_spent", forged)
        await run.pause(by="probe")  # taken after the forged report: it was seen by then
        await eventually(lambda: _paused(run))
        summary = await run.summary()
        own = (await child.summary()).spent
        await run.cancel(by="probe")
        # nothing is left open on the shared server: later tests skip its time
        assert (await run.result()).status == (await child.result()).status == "cancelled"
    assert summary.spent is not None and summary.spent.usd < FORGED.usd
    # What the parent shows is the child's own spend, read while the child still runs.
    assert own is not None and own.tokens > 0 and summary.delegations[0].spent == own
    assert token is None  # nothing in the start input to forge a report with


async def test_a_report_carrying_a_token_changes_nothing_either(time_env):
    """A token is no key to the parent's figures: neither a guessed one nor one shaped as
    an old-style run's (a uuid) makes the report's amount count."""
    policy = RunPolicy(approve_all_side_effects=True)  # the child waits: its spend stays put
    async with AgentTestbed(triage, model=model_with_a_report(), env=time_env) as bed:
        temporal = bed.client.temporal
        run = await bed.start("triage", "Ticket 15", policy=policy)
        child = await run.next_sub_agent()
        await child.next_approval()
        parent = temporal.get_workflow_handle(run.run_id)
        for token in ("a-guessed-token", str(uuid.uuid4())):
            forged = ChildSpend(child_id=child.run_id, spent=FORGED, token=token)
            await parent.signal("child_spent", forged)
        await run.pause(by="probe")  # taken after the forged reports: they were seen by then
        await eventually(lambda: _paused(run))
        summary = await run.summary()
        own = (await child.summary()).spent
        await run.cancel(by="probe")
        assert (await run.result()).status == (await child.result()).status == "cancelled"
    assert summary.spent is not None and summary.spent.usd < FORGED.usd
    assert summary.spent.tokens < FORGED.tokens
    assert own is not None and own.tokens > 0 and summary.delegations[0].spent == own


async def test_only_the_callers_own_sub_agent_is_read(time_env):
    """`child_spend` asked, as one run, for another run of ours on the same queue (a run
    of its own, or another run's sub-agent) is refused for good: only a run Temporal
    records as the caller's child is read."""
    policy = RunPolicy(approve_all_side_effects=True)
    async with AgentTestbed(triage, model=model_with_a_report(), env=time_env) as bed:
        temporal = bed.client.temporal
        run = await bed.start("triage", "Ticket 16", policy=policy)
        child = await run.next_sub_agent()
        await child.next_approval()
        other = await bed.start("triage", "Ticket 17", policy=policy)
        others_child = await other.next_sub_agent()
        await others_child.next_approval()
        caller = await temporal.get_workflow_handle(run.run_id).describe()
        env = acting_for(temporal, caller)
        read = await env.run(child_spend, child.run_id)
        refusals = []
        for stranger in (other.run_id, others_child.run_id):
            with pytest.raises(ApplicationError) as refused:
                await env.run(child_spend, stranger)
            refusals.append(refused.value)
        own = (await child.summary()).spent
        for handle, sub in ((run, child), (other, others_child)):
            await handle.cancel(by="probe")
            assert (await handle.result()).status == (await sub.result()).status == "cancelled"
    assert caller.task_queue == bed.task_queue
    assert own is not None and own.tokens > 0 and read == own
    for refusal in refusals:
        assert refusal.non_retryable
        assert f"is no sub-agent of {run.run_id}" in str(refusal)


class _IdTakenOnceDescribed(Interceptor):
    """A client on which the first describe of `workflow_id` is followed, before its
    answer comes back, by `take_the_id` (which closes that run and starts another under
    the same id): the race between `child_spend`'s describe and its query, made to happen."""

    def __init__(self, workflow_id: str, take_the_id: Any) -> None:
        self.workflow_id = workflow_id
        self.take_the_id = take_the_id

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        outer = self

        class Outbound(OutboundInterceptor):
            async def describe_workflow(
                self, input: DescribeWorkflowInput
            ) -> WorkflowExecutionDescription:
                described = await super().describe_workflow(input)
                if input.id == outer.workflow_id and outer.take_the_id is not None:
                    take, outer.take_the_id = outer.take_the_id, None
                    await take()
                return described

        return Outbound(next)


async def test_the_run_described_is_the_run_read_though_a_newer_one_took_its_id(time_env):
    """`child_spend` reads the sub-agent run it described and checked: when, between the
    two, the child closed and someone started another run under its id (with another
    spend), the answer is still the described child's spend, never the newcomer's."""
    policy = RunPolicy(approve_all_side_effects=True)  # the child waits: its spend stays put
    async with AgentTestbed(triage, model=model_with_a_report(), env=time_env) as bed:
        temporal = bed.client.temporal
        run = await bed.start("triage", "Ticket 18", policy=policy)
        child = await run.next_sub_agent()
        await child.next_approval()
        own = (await child.summary()).spent
        caller = await temporal.get_workflow_handle(run.run_id).describe()
        newcomer = RunHandle(temporal, child.run_id)

        async def take_the_id() -> None:
            await run.cancel(by="probe")  # the child closes with its parent
            assert (await run.result()).status == (await child.result()).status == "cancelled"
            request = RunRequest(
                goal="Report on Y, at length. " * 40, agent="research", policy=policy
            )
            await temporal.start_workflow(
                AgentWorkflow.run, request, id=child.run_id, task_queue=bed.task_queue
            )
            await newcomer.next_approval()  # it has spent, and waits

        race = _IdTakenOnceDescribed(child.run_id, take_the_id)
        config = temporal.config()
        config["interceptors"] = [race]
        racing = Client(**config)
        env = acting_for(racing, caller)
        read = await env.run(child_spend, child.run_id)
        newer = (await newcomer.summary()).spent
        await newcomer.cancel(by="probe")
        assert (await newcomer.result()).status == "cancelled"
    assert own is not None and own.tokens > 0 and newer is not None and newer != own
    assert read == own


async def test_no_update_or_query_answers_with_a_token_and_no_history_holds_one(time_env):
    policy = RunPolicy(approve_all_side_effects=True)
    async with AgentTestbed(triage, model=model_with_a_report(), env=time_env) as bed:
        temporal = bed.client.temporal
        run = await bed.start("triage", "Ticket 14", policy=policy, budget=RunBudget(usd=50))
        child = await run.next_sub_agent()
        await child.next_approval()
        parent = temporal.get_workflow_handle(run.run_id)
        # Answered as a reader gets them: the JSON each carries, untyped.
        edited = await parent.execute_update("edit", StatePatch(by="ops", context=["a note"]))
        raised = await parent.execute_update("raise_budget", BudgetRaise(by="ops", usd=60))
        queried = [await parent.query(name) for name in QUERIES]
        await child.approve(by="alice")
        result = await run.result()
        histories = [
            (await temporal.get_workflow_handle(run_id).fetch_history()).to_json_dict()
            for run_id in (run.run_id, child.run_id)
        ]
    assert result.status == "completed"
    [delegation] = edited["delegations"]  # the edit's answer names the running child
    assert delegation["child_id"] == child.run_id and delegation["status"] == "running"
    assert raised["usd"] == 60
    assert tokens_in([edited, raised, *queried]) == []
    assert tokens_in([list(payloads(history)) for history in histories]) == []


def acting_for(client: Client, caller: Any) -> ActivityEnvironment:
    """An activity environment whose calling run is `caller` (a run's description)."""
    env = ActivityEnvironment(client=client)
    env.info = dataclasses.replace(
        env.info,
        workflow_id=caller.id,
        workflow_run_id=caller.run_id,
        workflow_type=caller.workflow_type,
        task_queue=caller.task_queue,
    )
    return env
