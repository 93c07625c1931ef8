"""Continue-as-new while people act: signals, updates and queries sent all along a chain
of runs are each applied once or answered; none is lost at a boundary."""

from __future__ import annotations

import pytest

from durable_agents.control import runs
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor, StatePatch
from tests.conftest import run_id

pytestmark = pytest.mark.usefixtures("worker")


async def test_signals_updates_and_queries_across_the_chain(dev_env, settings):
    client, rid = dev_env.client, run_id("chain")
    request = RunRequest.model_validate(
        {
            "goal": "long",
            "scenario": "long?steps=40&reply_bytes=64",
            "limits": {"continue_as_new_after_events": 60},
        }
    )
    await runs.start_run(client, settings, request, rid)
    edits = pauses = resumes = queries = 0
    chains: set[int] = set()
    while True:
        state = await runs.get_state(client, rid)  # a query, answered in every run
        queries += 1
        chains.add(state.chain)
        if state.status.is_closed:
            break
        try:
            await runs.edit(client, rid, StatePatch(by="ed", context=[f"edit {edits}"]))
            edits += 1
        except runs.RunError as err:
            assert "completed" in str(err), err  # only a run that has just finished refuses
            continue
        # A signal the server took is applied, at a boundary too; one it refused (the run
        # had just finished) is not counted.
        try:
            await runs.pause(client, rid, Actor(by="pam"))
            pauses += 1
            await runs.resume(client, rid, Actor(by="pam"))
            resumes += 1
        except runs.RunError as err:
            assert "completed" in str(err), err

    final = await runs.get_state(client, rid)
    assert final.status.value == "completed" and final.chain >= 3 and len(chains) >= 3
    actions = [entry.action for entry in final.audit]
    assert actions.count("edited") == edits > 0
    assert actions.count("pause_requested") == pauses > 0
    assert actions.count("resumed") == resumes
    assert queries > len(chains)
