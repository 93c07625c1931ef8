"""An upgrade from the previous release (before one import package, issue 38), with runs in
flight: workers of the previous main (its code taken from git) start a payment that waits for
approval and a long run that is paused mid-chain (continued as new already); they stop;
this code's worker picks both up and finishes them, with no workflow task failing and the
payment made once. The workflow's registered name, module and handler names are what
made that possible; a change to them goes red here."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

from durable_agents.control import runs
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor, Decision
from tests.conftest import count_effects, eventually, run_id, settings_for, spawn_worker_of

ROOT = Path(__file__).parent.parent.parent
# main as it landed before one import package (stop 36): the build runs were started on,
# its modules top-level packages (`python -m worker`), its stores without schema versions.
PREVIOUS_MAIN = "c8c51334f231e2c9328bdeeaa539c2073a1edb15"


def previous_main(into: Path) -> Path:
    """The previous main's code, from this clone's history. A clone without that history
    (a shallow one) cannot hold the other build: said, and skipped."""
    found = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{PREVIOUS_MAIN}^{{commit}}"],
        capture_output=True,
    )
    if found.returncode != 0:
        pytest.skip(
            f"this clone has no commit {PREVIOUS_MAIN[:12]} (shallow?): no build to upgrade from"
        )
    into.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", PREVIOUS_MAIN], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


async def test_runs_in_flight_on_the_previous_main_finish_on_this_code(
    dev_env, model_server, tmp_path
):
    client = dev_env.client
    settings = settings_for(client, tmp_path / "data", model_server.port, versioning=False)
    old_code = previous_main(tmp_path / "previous-main")
    pay, long = run_id("upgrade-pay"), run_id("upgrade-long")
    old = spawn_worker_of(old_code, settings, tmp_path / "previous-worker.log", module="worker")
    try:
        await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), pay)
        chained = RunRequest.model_validate(
            {
                "goal": "long",
                # 40 steps: the pause, sent after step 4, lands long before the last one.
                "label": "long?steps=40&reply_bytes=64",
                "limits": {"continue_as_new_after_events": 60},
            }
        )
        await runs.start_run(client, settings, chained, long)

        async def mid_chain() -> bool:
            state = await runs.get_state(client, long)
            return state.chain >= 2 and len(state.steps.completed) >= 4

        await eventually(mid_chain, within=120)
        await runs.pause(client, long, Actor(by="ops", reason="deploying"))

        async def both_wait() -> bool:
            paid, paused = await runs.get_summary(client, pay), await runs.get_summary(client, long)
            return bool(paid.pending_approvals) and paused.waiting_for == "resume"

        await eventually(both_wait, within=120)
        before = (await runs.get_state(client, long)).chain
    finally:
        old.terminate()
        await asyncio.to_thread(old.wait, 60)

    async with build_worker(client, settings):  # this code, on the same task queue
        await runs.approve(client, pay, Decision(by="alice"))
        await runs.resume(client, long, Actor(by="ops"))
        # Bounded: a run this code cannot replay fails its workflow task again and again.
        results = [
            await asyncio.wait_for(runs.wait_result(client, rid), timeout=120)
            for rid in (pay, long)
        ]
        after = await runs.get_state(client, long)
    assert [r.status for r in results] == ["completed", "completed"]
    assert count_effects(settings, pay, "charge") == 1
    assert after.chain >= before >= 2 and len(after.steps.completed) == 40
    for rid in (pay, long):
        history = await client.get_workflow_handle(rid).fetch_history()
        failed = [
            e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        ]
        assert failed == [], (rid, failed)
