"""`agentctl release` as an operator uses it: the check on exported histories (a CI gate
with no server), and the verbs on a live deployment."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

from durable_agents.control import release, runs
from durable_agents.infra.stack import settings_env
from durable_agents.runtime import versioning
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor
from tests.conftest import wait_for_approval
from tests.histories.rule_agent import FIXTURE_AGENT_MODULES
from tests.release.builds import UnpatchedStart
from tests.starters.test_verb_walk import agentctl, assert_one_error_line

HISTORIES = Path(__file__).parent.parent / "histories"
FIXTURES = sorted(p.stem for p in HISTORIES.glob("*.json") if p.stem != "manifest")


async def test_the_replay_fixtures_pass_on_the_code_here():
    fixture_agents = {"AGENT_MODULES": ",".join(FIXTURE_AGENT_MODULES)}
    result = await agentctl(fixture_agents, "release", "check", str(HISTORIES))
    assert result.exit_code == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == len(FIXTURES) and all(line.startswith("ok") for line in lines)
    assert sorted(Path(line.split()[1]).stem for line in lines) == FIXTURES  # not the manifest


async def test_an_unpatched_change_fails_every_fixture_naming_the_event():
    outcomes = await release.check_files([HISTORIES], workflows=[UnpatchedStart])
    assert sorted(o.path.stem for o in outcomes) == FIXTURES
    for outcome in outcomes:
        assert not outcome.ok, outcome
        assert "ondeterminism" in outcome.message, outcome
        # The first command the recorded code issued, where the change starts a timer: an
        # upsert, or in runs recorded since `step-published-with-status`, its marker.
        first_commands = ("UpsertWorkflowSearchAttributes", "MarkerRecorded")
        assert outcome.event_id in first_commands_of(outcome.path), outcome
        assert outcome.event_type in first_commands, outcome


def first_commands_of(path) -> set[int]:
    """Where the changed build parts ways: the first command, or, where the run opened on
    the one `opening-in-one-marker` marker that both builds ask as the run is built (the
    marker and its search-attribute write match), the command after that pair."""
    first = first_command(path)
    events = {int(e["eventId"]): e for e in json.loads(path.read_text())["events"]}
    marker = events[first].get("markerRecordedEventAttributes", {})
    payloads = marker.get("details", {}).get("patch-data", {}).get("payloads", [])
    said = [base64.b64decode(payload["data"]) for payload in payloads]
    opened = any(b'"opening-in-one-marker"' in data for data in said)
    return {first, first + 2} if opened else {first}


def first_command(path) -> int:
    """The id of the first event a command made: the one after the first completed
    workflow task (5, or later when the run started with a signal)."""
    events = json.loads(path.read_text())["events"]
    done = next(e for e in events if e["eventType"] == "EVENT_TYPE_WORKFLOW_TASK_COMPLETED")
    return int(done["eventId"]) + 1


async def test_the_command_names_the_event_where_a_history_parts_ways(tmp_path):
    events = json.loads((HISTORIES / "happy-path.json").read_text())
    scheduled = next(
        e
        for e in events["events"]
        if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"
        and e["activityTaskScheduledEventAttributes"]["activityType"]["name"] == "run_tool"
    )
    scheduled["activityTaskScheduledEventAttributes"]["activityType"]["name"] = "run_tool_v0"
    (tmp_path / "changed.json").write_text(json.dumps(events))
    (tmp_path / "notes.json").write_text("{}")  # in a directory: not a history, skipped

    result = await agentctl({}, "release", "check", str(tmp_path))
    assert result.exit_code == 1
    [line] = result.stdout.splitlines()
    assert line.startswith("DIVERGES") and "changed.json" in line
    assert f"at event {scheduled['eventId']} (ActivityTaskScheduled)" in line

    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_error_line(
        await agentctl({}, "release", "check", str(empty)), "check", "no history files there"
    )


async def test_the_verbs_on_a_live_deployment(dev_env, settings, worker):
    client, env = dev_env.client, settings_env(settings)
    here = versioning.build_id(settings)
    rid = f"live-{uuid.uuid4().hex[:8]}"
    request = RunRequest(goal="pay the invoice", agent="invoice", label="pay-invoice")
    await runs.start_run(client, settings, request, rid)
    await wait_for_approval(client, rid)

    status = await agentctl(env, "release", "status", "--json")
    assert status.exit_code == 0, status.stderr
    found = json.loads(status.stdout)
    assert found["deployment"] == settings.deployment and found["current"] == here
    [mine] = [b for b in found["builds"] if b["build"] == here]
    assert mine["here"] and mine["state"] == "current" and mine["open_runs"] >= 1
    assert not mine["retirable"]

    checked = await agentctl(env, "release", "check", "--per-agent", "0")
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    assert any(rid in line and line.startswith("ok") for line in checked.stdout.splitlines())
    assert f"replay on build {here}" in checked.stdout

    for args, says in (
        (["promote", here], f"build {here} is already current"),
        (["promote", "nowhere"], f"nowhere has polled deployment {settings.deployment}"),
        (["move", rid, "--to", here], f"already on build {here}"),
        (["move", rid, "--to", "nowhere"], "no worker of build nowhere"),
    ):
        assert_one_error_line(await agentctl(env, "release", *args), args, says)
    for args in (["promote", ""], ["promote", "two words"], ["move", rid, "--to", ""]):
        assert_one_error_line(await agentctl(env, "release", *args), args, "bad build id")
    unversioned = env | {"AGENT_WORKER_VERSIONING": "false"}
    for args in (["status"], ["promote", here], ["move", rid, "--to", here]):
        result = await agentctl(unversioned, "release", *args)
        assert_one_error_line(result, args, "worker versioning is off")
    await runs.cancel(client, rid, Actor(by="test"))
    await runs.wait_result(client, rid)
