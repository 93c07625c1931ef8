"""The testbed's start: on a time-skipping server of the team's own, which cannot list
search attributes, it registers ours (a run starts and completes there); and a start
that fails after the server is up (a class that is no workflow, an activity's name taken
twice) leaves nothing behind: no test-server process, no data dir, a server of the
team's own still serving."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio import activity
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from durable_agents.infra.binaries import temporal_test_server
from durable_agents.testing import AgentTestbed, ScriptedModel, say
from tests.calling.billing import GOOD, TriageDecision, triage
from tests.conftest import _startup_timeout, eventually


class NotAWorkflow:
    """No @workflow.defn: the worker refuses it when the testbed builds it."""

    async def run(self) -> None:
        return None


@activity.defn(name="call_model")
async def call_model_of_ours() -> None:
    """A team activity under a name our worker's activity has."""


def server_children() -> set[int]:
    """This process's children running Temporal's test server (a zombie reads as gone:
    its command line is empty)."""
    binary = str(temporal_test_server()).encode()
    me = str(os.getpid())
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            command = (entry / "cmdline").read_bytes()
        except OSError:  # ended while read
            continue
        if parent == me and command.startswith(binary):
            found.add(int(entry.name))
    return found


async def test_a_fresh_time_skipping_server_of_yours_gets_our_search_attributes():
    """Started as a team would, without our attributes: the testbed registers them
    where the server cannot list them, so the run's first upsert is not refused."""
    fresh = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(temporal_test_server()),
        data_converter=pydantic_data_converter,
        **_startup_timeout(WorkflowEnvironment.start_time_skipping, "test_server_startup_timeout"),
    )
    try:
        async with AgentTestbed(triage, env=fresh, model=ScriptedModel([say(GOOD)])) as bed:
            run = await bed.start("triage", "Charged twice")
            result = await run.result()
            decision = await run.output(TriageDecision)
    finally:
        await fresh.shutdown()
    assert result.status == "completed"
    assert decision == TriageDecision(refund=True, priority="high")


async def test_a_testbed_that_fails_to_start_stops_its_server_and_removes_its_dir():
    before = server_children()
    bed = AgentTestbed(triage, model=ScriptedModel([say(GOOD)]), workflows=[NotAWorkflow])
    with pytest.raises(ValueError, match="NotAWorkflow missing attributes"):
        async with bed:
            pass
    assert not bed.data_dir.exists()

    async def stopped() -> bool:
        return server_children() <= before

    await eventually(stopped)


async def test_a_failed_start_on_your_server_leaves_it_serving(own_clock):
    """An activity name of ours taken by the team's: refused; the server is the team's,
    so it is not shut down (the next testbed on it runs), and the data dir is gone."""
    bed = AgentTestbed(triage, env=own_clock, activities=[call_model_of_ours])
    with pytest.raises(ValueError, match="call_model"):
        async with bed:
            pass
    assert not bed.data_dir.exists()
    async with AgentTestbed(triage, env=own_clock, model=ScriptedModel([say(GOOD)])) as next_bed:
        run = await next_bed.start("triage", "Charged twice")
        assert (await run.result()).status == "completed"
