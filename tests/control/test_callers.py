"""A team's own id where a run's is asked for: `agentctl show|approve|inbox` find the agent
run a team's workflow started with `run_agent` through Temporal's visibility
(ParentWorkflowId), on the dev server, and show its id whole."""

from __future__ import annotations

import json
import uuid

import pytest

from durable_agents.control import callers, runs
from durable_agents.control.runs import RunError
from durable_agents.infra.stack import settings_env
from durable_agents.starters.render import inbox_table
from durable_agents.starters.terminal import SafeConsole
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from durable_agents.workflows.people_inputs import DecideRequest
from tests.calling.billing import GOOD, Billing, Dispute, triage
from tests.conftest import eventually
from tests.control.two_triages import TwoTriages
from tests.starters.test_verb_walk import agentctl


def refund_then_answer() -> ScriptedModel:
    return ScriptedModel([call("issue_refund", customer="42", amount=80.0), say(GOOD)] * 3)


async def waiting_children(client, caller: str, count: int) -> list[str]:
    """The caller's agent runs once `count` of them wait for an approval (visibility is
    eventually consistent: waited for, not assumed)."""

    async def waiting() -> list[str]:
        found = await callers.agent_runs_of(client, caller)
        ids = [r.run_id for r in found if r.waiting_for == "approval"]
        return ids if len(ids) == count else []

    ids: list[str] = await eventually(waiting)
    return ids


def cli_env(bed: AgentTestbed, dev_env) -> dict[str, str]:
    host, _, port = dev_env.client.service_client.config.target_host.rpartition(":")
    return settings_env(
        bed.settings.model_copy(update={"temporal_host": host, "temporal_port": int(port)})
    )


async def test_approve_show_and_inbox_by_the_callers_id(dev_env):
    caller = f"order-{uuid.uuid4().hex[:6]}"
    async with AgentTestbed(
        triage, model=refund_then_answer(), env=dev_env, workflows=[Billing]
    ) as bed:
        handle = await bed.temporal.start_workflow(
            Billing.run, Dispute(text="Customer 42 charged twice"), id=caller,
            task_queue=bed.task_queue,
        )  # fmt: skip
        [child] = await waiting_children(bed.temporal, caller, 1)
        # Named by run_agent after its caller, and found through it, not guessed.
        assert child.startswith(f"{caller}.triage-")
        env = cli_env(bed, dev_env)

        shown = await agentctl(env, "show", caller, "--json")
        assert shown.exit_code == 0, shown.stderr
        assert [s["run_id"] for s in json.loads(shown.stdout)["agent_runs"]] == [child]
        printed = await agentctl(env, "show", caller)
        assert "is not an agent run; the agent runs it started:" in printed.stdout
        assert f"  {child}  awaiting_approval" in printed.stdout.splitlines()

        [item] = await runs.inbox(bed.temporal, task_queue=bed.task_queue)
        assert (item.run_id, item.parent) == (child, caller)
        narrow = SafeConsole(record=True, width=60)
        narrow.print(inbox_table([item]))
        assert child in narrow.export_text()  # whole, however narrow the terminal

        approved = await agentctl(env, "approve", caller, "--as", "finance")
        assert approved.exit_code == 0, approved.stderr
        assert f"(run {child})" in approved.stdout and "by finance" in approved.stdout
        assert await handle.result() == "refund (high)"


async def test_two_waiting_agent_runs_are_named_in_one_line(dev_env):
    caller = f"order-{uuid.uuid4().hex[:6]}"
    async with AgentTestbed(
        triage, model=refund_then_answer(), env=dev_env, workflows=[TwoTriages]
    ) as bed:
        await bed.temporal.start_workflow(
            TwoTriages.run, "Customer 42 charged twice", id=caller, task_queue=bed.task_queue
        )
        ids = await waiting_children(bed.temporal, caller, 2)
        request = DecideRequest(approve=True, by="finance")

        async def approve(run_id: str) -> str:
            return await callers.act_for_person(
                bed.temporal,
                run_id,
                "approval",
                lambda run: runs.decide(bed.temporal, run, request),
            )

        with pytest.raises(RunError) as refused:
            await approve(caller)
        message = str(refused.value)
        assert "\n" not in message and "2 agent runs of" in message
        assert all(run_id in message for run_id in ids)
        # Either, named in full, is approved as any run.
        assert "by finance" in await approve(ids[0])


async def test_an_id_that_is_neither_is_refused_in_one_line(dev_env):
    with pytest.raises(RunError, match="no run with id nobody-"):
        await callers.target(dev_env.client, f"nobody-{uuid.uuid4().hex[:6]}")
