"""agentctl agents, and run --agent/--policy/--limits: checked before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from durable_agents.infra.offline_model.embedded import free_port
from durable_agents.runtime.operator_files import SMALL_FILE_BYTES as MAX_OPTION_FILE_BYTES
from durable_agents.starters.cli import app

RUNNER = CliRunner()


def agentctl(*args: str, **env: str):
    # No Temporal listens on this port: whatever is refused, is refused before connecting.
    return RUNNER.invoke(app, list(args), env={"AGENT_TEMPORAL_PORT": str(free_port()), **env})


def test_agents_lists_the_bundled_agents_and_their_risks():
    result = agentctl("agents", "--json")
    assert result.exit_code == 0, result.stderr
    listed = {a["name"]: a for a in json.loads(result.stdout)}
    assert set(listed) == {
        "before-agents", "invoice", "large-result", "question", "refund", "research", "triage",
        "support-chat",
    }  # fmt: skip
    assert listed["triage"]["delegates"] == [
        {"tool": "ask_research", "agent": "research", "risk": "read_only"}
    ]
    assert listed["triage"]["budget"] == {"usd": 0.5, "tool_calls": 20}
    [kb] = listed["research"]["mcp_servers"]
    assert kb["transport"] == "stdio" and kb["risks"]["add_note"] == "side_effect"
    risks = {t["name"]: t["risk"] for t in listed["invoice"]["tools"]}
    assert risks == {
        "lookup_invoice": "read_only",
        "draft_email": "side_effect",
        "pay_invoice": "needs_approval",
        "send_email": "side_effect",
    }
    assert listed["refund"]["planning"] is False
    table = agentctl("agents")
    assert table.exit_code == 0 and "pay_invoice" in table.stdout


def one_error(result, says: str) -> None:
    assert result.exit_code == 1, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_an_unknown_agent_or_module_is_refused_in_one_line():
    one_error(agentctl("run", "goal", "--agent", "nobody"), "no agent named 'nobody' (known:")
    one_error(agentctl("agents", AGENT_MODULES="no_such_module"), "cannot import agent module")
    only = agentctl(
        "run",
        "goal",
        AGENT_MODULES="durable_agents.examples.invoice,durable_agents.examples.refund",
    )
    one_error(only, "name the agent with --agent (invoice, refund)")
    # The legacy agent among several is no default either: nothing runs unchosen.
    legacy = agentctl("run", "goal")
    one_error(legacy, "name the agent with --agent (before-agents, invoice, ")
    alone = agentctl(
        "run", "goal", "--subject", "bad", AGENT_MODULES="durable_agents.examples.refund"
    )
    one_error(alone, "--subject takes KEY=VALUE, not 'bad'")


@pytest.mark.parametrize(
    ("flag", "text", "says"),
    [
        ("--policy", "{not json", "not valid JSON"),
        ("--policy", '{"approve_payments_above": -1}', "approve_payments_above: Input should be"),
        ("--policy", '{"launch": true}', "launch: Extra inputs are not permitted"),
        ("--limits", '{"max_turns_per_step": 0}', "max_turns_per_step: Input should be"),
        ("--limits", "[1, 2]", "Input should be a valid dictionary"),
    ],
)
def test_policy_and_limits_files_are_validated_before_the_start(tmp_path, flag, text, says):
    path = tmp_path / "file.json"
    path.write_text(text)
    one_error(agentctl("run", "goal", "--agent", "invoice", flag, str(path)), says)


@pytest.mark.parametrize(
    "command",
    [
        ["run", "goal", "--agent", "invoice"],
        ["chat", "invoice"],
        ["schedule", "create", "nightly", "goal", "--agent", "invoice", "--every", "1h"],
    ],
    ids=["run", "chat", "schedule"],
)
@pytest.mark.parametrize("flag", ["--policy", "--limits", "--budget"])
def test_an_option_file_too_large_or_not_text_is_refused_unread(tmp_path, command, flag):
    """Every command START_FLAGS gives a file flag: a huge file (or an endless one) is
    refused by its size before it is parsed, bytes that are no text in one line."""
    huge = tmp_path / "huge.json"
    huge.write_text('{"a": "' + "x" * (MAX_OPTION_FILE_BYTES + 1) + '"}')
    one_error(agentctl(*command, flag, str(huge)), "larger than 1,048,576")
    endless = agentctl(*command, flag, "/dev/zero")
    one_error(endless, "larger than 1,048,576 bytes")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{}")
    one_error(agentctl(*command, flag, str(binary)), "not valid JSON")


def test_limits_a_plain_loop_would_ignore_are_refused(tmp_path):
    path = tmp_path / "limits.json"
    path.write_text('{"steps_end": "complete_step"}')
    refused = agentctl("run", "goal", "--agent", "refund", "--limits", str(path))
    one_error(refused, "agent 'refund' is a plain tool loop")


def test_a_missing_file_and_toml(tmp_path):
    one_error(agentctl("run", "g", "--policy", str(tmp_path / "nope.json")), "No such file")
    toml = tmp_path / "limits.toml"
    toml.write_text("max_turns_per_step = = 3\n")
    one_error(agentctl("run", "g", "--limits", str(toml)), "not valid TOML")


def test_a_worker_whose_agent_modules_do_not_load_stops_with_one_line():
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "AGENT_MODULES": "durable_agents.examples.invoice,nope",
        "AGENT_METRICS_PORT": "0",
    }
    done = subprocess.run(
        [sys.executable, "-m", "durable_agents.worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot import agent module 'nope'" in lines[0], lines


@pytest.mark.parametrize("name", ["AGENT_CONSOLE_OPERATORS", "AGENT_REVOKED_KEYS"])
def test_a_list_setting_that_is_no_json_is_one_line_not_a_traceback(name: str) -> None:
    """Run as installed (`agentctl`, its own process): a careless `[alice` in a list
    setting ends the command with one line and exit code 1."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    agentctl_bin = Path(sys.executable).parent / "agentctl"
    env = {**os.environ, name: "[alice", "AGENT_TEMPORAL_PORT": str(free_port())}
    done = subprocess.run(
        [str(agentctl_bin), "agents"], env=env, capture_output=True, text=True, timeout=60
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith("error: error parsing value for field") and "JSON" in lines[0]


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"AGENT_REQUIRE_SIGNED_PAYMENTS": "1"}, "AGENT_TRUSTED_KEYS_FILE"),
        ({"AGENT_REQUIRE_SEALED_INPUTS": "1"}, "AGENT_ENCRYPTION_KEYS"),
    ],
)
def test_settings_that_do_not_go_together_are_one_line(env: dict[str, str], names: str):
    """A protection switched on without what it needs stops agentctl in one line, never
    with a validation traceback (agentctl's own entry point, as a person runs it)."""
    command = "from durable_agents.starters.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", command, "agents"],
        env={**os.environ, "AGENT_TEMPORAL_PORT": str(free_port()), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = done.stderr.strip()
    assert done.returncode == 1, (done.returncode, said)
    assert said.startswith("error: ") and "\n" not in said, said
    assert names in said, said
