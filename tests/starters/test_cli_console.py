"""agentctl users and keys: the identities behind decisions, checked in one line each."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from typer.testing import CliRunner

from durable_agents.console import users
from durable_agents.control.signer import read_signer
from durable_agents.starters.cli import app
from durable_agents.workflows.contracts import RunPolicy

RUNNER = CliRunner()


def agentctl(data_dir: Path, *args: str, stdin: str | None = None):
    return RUNNER.invoke(app, list(args), input=stdin, env={"AGENT_DATA_DIR": str(data_dir)})


def test_users_add_list_remove(tmp_path):
    added = agentctl(tmp_path, "users", "add", "alice", "--password-stdin", stdin="long-enough\n")
    assert added.exit_code == 0 and "added alice" in added.stdout
    path = tmp_path / "console-users.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "long-enough" not in path.read_text()
    assert users.verify(path, "alice", "long-enough")
    assert not users.verify(path, "alice", "wrong-password")
    again = agentctl(tmp_path, "users", "add", "alice", "--password-stdin", stdin="another-one\n")
    assert "password changed for alice" in again.stdout
    assert users.verify(path, "alice", "another-one")
    assert agentctl(tmp_path, "users", "list").stdout.split() == ["alice"]

    short = agentctl(tmp_path, "users", "add", "bob", "--password-stdin", stdin="short\n")
    assert short.exit_code == 1
    assert short.stderr.strip() == "error: the password must have at least 8 characters"
    bad = agentctl(tmp_path, "users", "add", "bob smith", "--password-stdin", stdin="x" * 9)
    assert bad.exit_code == 1 and bad.stderr.startswith("error: user name 'bob smith'")
    missing = agentctl(tmp_path, "users", "remove", "carol")
    assert missing.exit_code == 1 and "no user 'carol'" in missing.stderr
    assert agentctl(tmp_path, "users", "remove", "alice").exit_code == 0
    assert agentctl(tmp_path, "users", "list").stdout.strip() == ""

    path.write_text("not json")
    broken = agentctl(tmp_path, "users", "list")
    assert broken.exit_code == 1 and "not a users file" in broken.stderr


def test_keys_new_and_console_print_policy_entries(tmp_path):
    key_file = tmp_path / "cfo.key"
    made = agentctl(tmp_path, "signing", "new", str(key_file), "--signs-for", "cfo")
    assert made.exit_code == 0, made.stderr
    entry = json.loads(made.stdout)
    policy = RunPolicy.model_validate({"require_signed_decisions": True, **entry})
    assert policy.trusted_keys["cfo"].signs_for == ["cfo"]
    assert read_signer(key_file, "cfo").public_key == policy.trusted_keys["cfo"].public_key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600

    again = agentctl(tmp_path, "signing", "new", str(key_file))
    assert again.exit_code == 1 and "never overwritten" in again.stderr

    first = json.loads(agentctl(tmp_path, "signing", "console").stdout)
    second = json.loads(agentctl(tmp_path, "signing", "console").stdout)
    assert first == second and first["trusted_keys"]["console"]["signs_for"] == []


def test_a_bad_signing_key_is_one_line(tmp_path):
    bad = tmp_path / "bad.key"
    bad.write_text("not a key")
    result = RUNNER.invoke(
        app,
        ["approve", "some-run"],
        env={"AGENT_DATA_DIR": str(tmp_path), "AGENT_SIGNING_KEY_FILE": str(bad)},
    )
    assert result.exit_code == 1
    assert (
        result.stderr.strip()
        == f"error: signing key {bad}: not an Ed25519 private key (32 bytes, base64)"
    )


def test_a_policy_that_requires_signatures_needs_keys():
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="needs at least one of trusted_keys"):
        RunPolicy(require_signed_decisions=True)
    with pytest.raises(ValidationError, match="raw Ed25519 key"):
        RunPolicy.model_validate({"trusted_keys": {"k": {"public_key": "A" * 44}}})


def test_the_console_without_temporal_says_so_in_one_line(tmp_path):
    import subprocess
    import sys

    from durable_agents.infra.offline_model.embedded import free_port

    env = {
        "PATH": "/usr/bin:/bin",
        "AGENT_DATA_DIR": str(tmp_path),
        "AGENT_TEMPORAL_PORT": str(free_port()),
        "AGENT_CONSOLE_PORT": str(free_port()),
    }
    done = subprocess.run(
        [sys.executable, "-m", "durable_agents.console"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert lines == [
        f"console: cannot reach Temporal at 127.0.0.1:{env['AGENT_TEMPORAL_PORT']} "
        "(plaintext): connection refused"
    ]
