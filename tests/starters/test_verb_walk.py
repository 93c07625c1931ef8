"""Every verb, walked as a careless operator would: with the server down, a bad or unknown
id, an unwritable path, a wedged run, a running id reused for another goal. Each ends in
one `error:` line and exit 1: never a traceback, never a hang."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from typer.testing import CliRunner

from durable_agents.control import runs
from durable_agents.infra.offline_model.embedded import free_port
from durable_agents.infra.stack import settings_env
from durable_agents.starters.cli import app
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Actor
from tests.conftest import start_wedged_run, wait_for_approval

# Every verb that takes a run id, with what else it needs.
ON_A_RUN = [
    ["show", "{id}"],
    ["watch", "{id}"],
    ["effects", "{id}"],
    ["approve", "{id}"],
    ["reject", "{id}"],
    ["answer", "{id}", "yes"],
    ["pause", "{id}"],
    ["resume", "{id}"],
    ["cancel", "{id}"],
    ["edit", "{id}", "--set", "goal=other"],
    ["budget", "{id}", "--usd", "1"],
    ["history", "{id}"],
    ["history", "{id}", "--step", "1"],
    ["history", "{id}", "--diff", "1"],
    ["fork", "{id}", "--from-step", "1"],
    ["rewind", "{id}", "--to-step", "1"],
    ["export", "{id}", "-o", "{tmp}/out.json"],
    ["release", "move", "{id}", "--to", "b1"],
]
NO_RUN = [
    ["run", "hello", "--agent", "before-agents"],
    ["list"],
    ["inbox"],
    ["prune", "--older-than", "1d"],
    ["setup"],
    ["schedule", "list"],
    ["schedule", "delete", "nightly"],
    ["release", "check"],
    ["release", "status"],
    ["release", "promote", "b1"],
]


async def agentctl(env: dict[str, str], *args: str):
    """The CLI in process, in a thread (each verb runs its own event loop); a hang fails."""
    runner = CliRunner()
    return await asyncio.wait_for(asyncio.to_thread(runner.invoke, app, list(args), env=env), 60)


def assert_one_error_line(result, args, says: str = "") -> None:
    assert result.exit_code == 1, (args, result.stdout, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        args,
        result.exception,
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), (args, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    assert says in lines[0], (args, lines[0])


def filled(args: list[str], **values: str) -> list[str]:
    return [a.format(**values) for a in args]


async def test_with_the_server_down_every_verb_says_so(settings, tmp_path):
    env = settings_env(settings) | {"AGENT_TEMPORAL_PORT": str(free_port())}
    for args in [*ON_A_RUN, *NO_RUN]:
        args = filled(args, id="r-1", tmp=str(tmp_path))
        result = await agentctl(env, *args)
        assert_one_error_line(result, args, "(plaintext): connection refused; is the stack up?")


@pytest.mark.usefixtures("worker")
async def test_bad_and_unknown_ids_and_unwritable_paths(dev_env, settings, tmp_path):
    env = settings_env(settings)
    for args in ON_A_RUN:
        for bad in ("", "two words", "ends-with-newline\n"):
            result = await agentctl(env, *filled(args, id=bad, tmp=str(tmp_path)))
            assert_one_error_line(result, args, "bad run id")
        result = await agentctl(env, *filled(args, id="nobody-ran-this", tmp=str(tmp_path)))
        assert_one_error_line(result, args, "nobody-ran-this")
    assert_one_error_line(
        await agentctl(env, "run", "x", "--agent", "before-agents", "--id", ""), "run", "bad run id"
    )

    rid = f"walk-{uuid.uuid4().hex[:8]}"
    await runs.start_run(
        dev_env.client,
        settings,
        RunRequest(goal="pay", agent="before-agents", label="pay-invoice"),
        rid,
    )
    await wait_for_approval(dev_env.client, rid)
    unwritable = await agentctl(env, "export", rid, "-o", str(tmp_path / "missing" / "x.json"))
    assert_one_error_line(unwritable, "export", "cannot write")
    # A running id with another goal is refused; the same request attaches.
    other = await agentctl(
        env,
        "run",
        "something else",
        "--agent",
        "before-agents",
        "--id",
        rid,
        "--scenario",
        "pay-invoice",
    )
    assert_one_error_line(other, "run", "already running with another request")
    same = await agentctl(
        env, "run", "pay", "--agent", "before-agents", "--id", rid, "--scenario", "pay-invoice"
    )
    assert same.exit_code == 0 and "attached to running run" in same.stdout

    # A database that does not answer: one line, and the timeline goes on without texts.
    no_db = env | {"AGENT_DATABASE_URL": f"postgresql://nobody:pw@127.0.0.1:{free_port()}/none"}
    effects = await agentctl(no_db, "effects", rid)
    assert_one_error_line(effects, "effects", "cannot read our stores (postgresql://127.0.0.1:")
    assert "pw" not in effects.stderr and "nobody" not in effects.stderr
    timeline = await agentctl(no_db, "history", rid, "--json")
    assert timeline.exit_code == 0 and timeline.stderr.startswith("note: no model and tool texts")

    no_start = tmp_path / "no-start.json"
    no_start.write_text(json.dumps({"events": [{"eventId": "5", "eventType": "TimerFired"}]}))
    replayed = await agentctl(env, "replay", str(no_start))
    assert replayed.exit_code == 1 and "does not begin with" in replayed.stdout
    assert replayed.stderr == "" and "Traceback" not in replayed.stdout
    await runs.cancel(dev_env.client, rid, Actor(by="test"))


@pytest.mark.usefixtures("worker")
async def test_a_wedged_run_is_named_wedged_by_every_verb(dev_env, settings, tmp_path):
    handle = await start_wedged_run(dev_env.client, settings.task_queue)
    rid = handle.id
    env = settings_env(settings)
    for args in (
        ["show", rid],
        ["approve", rid],
        ["answer", rid, "x"],
        ["edit", rid, "--set", "goal=x"],
    ):
        assert_one_error_line(await agentctl(env, *args), args, "wedged")
    await handle.terminate("test over")
