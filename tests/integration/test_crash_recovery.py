"""Kill the worker with SIGKILL mid-run, start another: the run completes, and no
completed step's effect happens twice (counted in the effect tables, not in logs)."""

from __future__ import annotations

import json
import signal
import urllib.request
from collections import Counter

from durable_agents.control import runs
from durable_agents.examples.providers import Providers
from durable_agents.infra.stack import worker_polling
from durable_agents.workflows.contracts import RunRequest
from tests.conftest import eventually, run_id, spawn_worker

STEPS = 30


def effects_per_step(settings, rid):
    """Notes per step, as the records provider counted them."""
    notes = Providers.open(settings.data_dir).records.effects(rid)
    return dict(Counter(note["detail"]["step"] for note in notes))


def completions(model_server, store_key):
    """Answers the model served for a run: it hears the run's identity, not its id."""
    with urllib.request.urlopen(f"{model_server.base_url}/scripted/stats") as response:
        return json.loads(response.read())["completions_by_run"].get(store_key, 0)


async def test_sigkill_mid_run_loses_nothing_and_repeats_nothing(
    dev_env, settings, model_server, tmp_path
):
    client, rid = dev_env.client, run_id("crash")
    first = spawn_worker(settings, tmp_path / "worker1.log")
    try:
        await eventually(lambda: worker_polling(settings), within=30)
        request = RunRequest.model_validate(
            {
                "goal": "long",
                "scenario": f"long?steps={STEPS}&reply_bytes=512",
                "limits": {"model_timeout_seconds": 3, "tool_timeout_seconds": 3},
            }
        )
        await runs.start_run(client, settings, request, rid)

        async def midway():
            return (await runs.get_summary(client, rid)).steps_done >= 8

        await eventually(midway, within=60, interval=0.02)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    done_at_kill = effects_per_step(settings, rid)
    assert 8 <= len(done_at_kill) < STEPS, "the kill must land in the middle of the run"

    second = spawn_worker(settings, tmp_path / "worker2.log")
    try:
        result = await runs.wait_result(client, rid)
        state = await runs.get_state(client, rid)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)

    assert result.status == "completed"
    per_step = effects_per_step(settings, rid)
    assert per_step == {step: 1 for step in range(1, STEPS + 1)}
    # Plan + one turn per step + final answer; a kill may lose at most the one answer
    # that was in flight, never one already stored.
    served = completions(model_server, state.store_key)
    assert STEPS + 2 <= served <= STEPS + 3
    assert len(state.steps.completed) == STEPS
