"""Scheduled agents on the dev server: a one-minute cron starts a run (a short real wait),
an interval schedule starts normal runs with their own ids, overlap skips, pause, trigger
and delete act, and a deleted schedule starts nothing more."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from durable_agents.client import AgentClient
from durable_agents.control import runs, schedules
from durable_agents.control.runs import RunError
from durable_agents.infra.stack import settings_env
from durable_agents.workflows.people_inputs import Actor
from tests.conftest import eventually
from tests.starters.test_verb_walk import agentctl, assert_one_error_line


async def started_runs(client, prefix: str) -> list[str]:
    """The runs a schedule started (not their sub-agents', whose ids go on with a dot)."""
    query = f'WorkflowType = "AgentWorkflow" AND WorkflowId STARTS_WITH "{prefix}-"'
    found = [w.id async for w in client.list_workflows(query)]
    return sorted(run for run in found if "." not in run.removeprefix(prefix))


async def test_schedules_start_runs_and_stop_when_deleted(dev_env, worker, settings, monkeypatch):
    monkeypatch.setenv("KB_DIR", str(settings.data_dir / "kb"))
    client, env, tag = dev_env.client, settings_env(settings), uuid.uuid4().hex[:6]
    cron, every, busy = f"cron-{tag}", f"every-{tag}", f"busy-{tag}"
    # A one-minute cron (Temporal's 7-field form, seconds first) due a few seconds from now:
    # each minute at that second, so the test waits seconds for its first run, not a minute.
    minutely = f"{(datetime.now(UTC).second + 5) % 60} * * * * * *"
    made = await agentctl(
        env, "schedule", "create", cron, "Ticket: late parcel",
        "--agent", "triage", "--cron", minutely, "--label", "triage",
    )  # fmt: skip
    assert made.exit_code == 0, made.stderr
    assert (await agentctl(
        env, "schedule", "create", every, "Ticket: late parcel",
        "--agent", "triage", "--every", "2s", "--label", "triage",
    )).exit_code == 0  # fmt: skip
    # a run that waits for a person: while it waits, each new time is skipped (overlap)
    assert (await agentctl(
        env, "schedule", "create", busy, "Refund 80", "--agent", "refund",
        "--every", "1s", "--label", "refund-loop",
    )).exit_code == 0  # fmt: skip

    listed = await agentctl(env, "schedule", "list", "--json")
    by_name = {s["name"]: s for s in json.loads(listed.stdout)}
    assert by_name[cron]["cron"] == [minutely] and by_name[cron]["agent"] == "triage"
    first, second = (datetime.fromisoformat(t) for t in by_name[cron]["next_runs"][:2])
    assert (second - first).total_seconds() == 60  # every minute
    assert by_name[every]["every_seconds"] == [2.0]
    assert "prune" not in " ".join(by_name)  # housekeeping schedules are not agents'

    # interval: normal runs of the agent, each with its own id, which complete
    two = await eventually(lambda: _at_least(client, every, 2), within=30)
    result = await runs.wait_result(client, two[0])
    assert result.status == "completed"
    assert (await runs.get_state(client, two[0])).agent.name == "triage"  # type: ignore[union-attr]

    # pause stops it; trigger starts one now anyway
    assert (await agentctl(env, "schedule", "pause", every, "--note", "maintenance")).exit_code == 0
    paused = await schedules.describe(client, every)
    assert paused.paused and paused.note == "maintenance"
    # none running, as the schedule itself counts: a trigger obeys the overlap policy too
    await eventually(lambda: _idle(client, every), within=30)
    before = len(await started_runs(client, every))
    assert (await agentctl(env, "schedule", "trigger", every)).exit_code == 0
    await eventually(lambda: _at_least(client, every, before + 1), within=30)
    assert (await agentctl(env, "schedule", "unpause", every)).exit_code == 0

    # the cron: its first run starts at its second of the minute
    [minute] = await eventually(lambda: _at_least(client, cron, 1), within=75)
    assert minute.startswith(f"{cron}-")
    overlapping = await schedules.describe(client, busy)
    assert len(await started_runs(client, busy)) == 1 and overlapping.skipped_overlapping >= 2

    for name in (cron, every, busy):
        assert (await agentctl(env, "schedule", "delete", name)).exit_code == 0
    counts = [len(await started_runs(client, name)) for name in (cron, every, busy)]
    # A witness with `every`'s interval, made after the deletes. Interval schedules fire at
    # the same instants (multiples of the interval), so by the witness's second run `every`
    # would have started another, were it still there: no sleep that hopes for it.
    witness = f"witness-{tag}"
    agents = AgentClient(client, settings)
    await agents.create_schedule(
        witness, "triage", "Ticket: late parcel", every=timedelta(seconds=2), label="triage"
    )
    await eventually(lambda: _at_least(client, witness, 2), within=30)
    await agents.delete_schedule(witness)
    assert [len(await started_runs(client, name)) for name in (cron, every, busy)] == counts
    gone = await agentctl(env, "schedule", "pause", every)
    assert_one_error_line(gone, ["schedule", "pause"], f"no schedule named {every!r}")
    for run in await started_runs(client, busy):  # leave no run waiting behind
        await runs.cancel(client, run, Actor(by="test"))


async def _idle(client, name: str) -> bool:
    described = await client.get_schedule_handle(name).describe()
    return not described.info.running_actions


async def _at_least(client, prefix: str, count: int) -> list[str] | None:
    found = await started_runs(client, prefix)
    return found if len(found) >= count else None


async def test_schedule_verbs_refuse_bad_input_in_one_line(dev_env, settings):
    env = settings_env(settings)
    cases = [
        (["schedule", "create", "x y", "goal", "--agent", "triage", "--cron", "* * * * *"],
         "bad schedule name"),
        (["schedule", "create", "ok", "goal", "--agent", "nobody", "--cron", "* * * * *"],
         "no agent named 'nobody'"),
        (["schedule", "create", "ok", "goal", "--agent", "triage"], "give --cron"),
        (["schedule", "create", "ok", "goal", "--agent", "triage", "--cron", "not a cron"],
         "Temporal refused schedule 'ok'"),
        (["schedule", "create", "ok", "goal", "--agent", "triage", "--every", "0s"],
         "at least 1s"),
        (["schedule", "delete", "no-such-schedule"], "no schedule named 'no-such-schedule'"),
        (["schedule", "trigger", "no-such-schedule"], "no schedule named"),
    ]  # fmt: skip
    for args, says in cases:
        assert_one_error_line(await agentctl(env, *args), args, says)


async def test_the_python_client_schedules_as_the_cli_does(dev_env, worker, settings):
    agents = AgentClient(dev_env.client, settings)
    name = f"py-{uuid.uuid4().hex[:6]}"
    info = await agents.create_schedule(
        name, "refund", "Refund 10 EUR", every=timedelta(hours=1), label="refund-loop"
    )
    assert (info.agent, info.every_seconds, info.paused) == ("refund", [3600.0], False)
    assert name in [s.name for s in await agents.schedules()]
    await agents.pause_schedule(name, "quiet week")
    assert (await schedules.describe(dev_env.client, name)).paused
    await agents.trigger_schedule(name)
    [started] = await eventually(lambda: _at_least(dev_env.client, name, 1), within=30)
    await agents.delete_schedule(name)
    with pytest.raises(RunError, match="no schedule named"):
        await agents.unpause_schedule(name)
    with pytest.raises(RunError, match="no agent named 'nobody'"):
        await agents.create_schedule(name, "nobody", "goal", cron=["* * * * *"])
    await runs.cancel(dev_env.client, started, Actor(by="test"))
