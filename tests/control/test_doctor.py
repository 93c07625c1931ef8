"""agentctl doctor: every part checked, and what is wrong said with how to fix it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr

from durable_agents.control.doctor import diagnose
from durable_agents.infra.offline_model.embedded import free_port
from durable_agents.infra.stack import worker_polling
from durable_agents.runtime.encryption import new_key
from durable_agents.runtime.extras import install_hint
from tests.conftest import eventually, start_wedged_run
from tests.starters.not_installed import env_without

AGENTCTL = str(Path(sys.executable).parent / "agentctl")


def by_part(findings):
    return {finding.part: finding for finding in findings}


async def test_a_healthy_setup_passes(worker, settings):
    await eventually(lambda: worker_polling(settings))  # a new worker's first poll
    findings = by_part(await diagnose(settings))
    assert all(f.ok for f in findings.values()), findings
    assert "search attributes registered" in findings["temporal"].says
    assert settings.task_queue in findings["worker"].says
    assert findings["encryption"].says.startswith("off")


async def test_what_is_wrong_is_said_with_a_fix(settings, tmp_path):
    broken = settings.model_copy(
        update={
            "temporal_port": free_port(),
            "offline_model_port": free_port(),
            "encryption_keys": SecretStr("k1=AAAA"),
            "database_url": "postgresql://nobody@127.0.0.1:1/none",
        }
    )
    findings = by_part(await diagnose(broken))
    # Every part fails but the transport (plaintext to this machine is what it should be)
    # and the protections (off is a warning: test_doctor_protections.py).
    assert not any(f.ok for part, f in findings.items() if part not in {"transport", "protections"})
    assert findings["transport"].ok and findings["transport"].says.startswith("plaintext to")
    assert "cannot reach Temporal" in findings["temporal"].says
    assert "agentctl up" in findings["temporal"].fix
    assert "agentctl up" in findings["model"].fix
    assert "AGENT_DATABASE_URL" in findings["stores"].fix
    assert "AES-256 needs 32" in findings["encryption"].says
    assert "agentctl keys new" in findings["encryption"].fix


async def test_keys_without_a_codec_server_say_the_ui_cannot_decode(settings):
    keyed = settings.model_copy(
        update={"encryption_keys": SecretStr(f"k1={new_key()}"), "codec_port": free_port()}
    )
    finding = by_part(await diagnose(keyed))["encryption"]
    assert not finding.ok and "codec server" in finding.says


def test_the_command_exits_non_zero_and_reads_a_settings_file(tmp_path):
    port = free_port()
    settings_file = tmp_path / "agent.env"
    settings_file.write_text(f"AGENT_TEMPORAL_PORT={port}\nAGENT_DATA_DIR={tmp_path}\n")
    env = {**os.environ, "AGENT_SETTINGS_FILE": str(settings_file)}
    env.pop("AGENT_TEMPORAL_PORT", None)
    done = subprocess.run([AGENTCTL, "doctor"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"127.0.0.1:{port}" in done.stdout  # the port came from the file
    assert "FAIL temporal" in done.stdout

    missing = {**env, "AGENT_SETTINGS_FILE": str(tmp_path / "nope.env")}
    done = subprocess.run(
        [AGENTCTL, "doctor"], env=missing, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "no such file" in done.stderr


def test_a_missing_driver_is_printed_with_its_extra_and_the_fix_installs_it(tmp_path):
    """AGENT_DATABASE_URL without the [postgres] extra: doctor prints the extra's name as
    it is (the terminal's markup would take `[postgres]` for a style and drop it) and the
    fix is the install line, not a check of the URL."""
    env = env_without(
        ["psycopg"],
        tmp_path / "site",
        {
            **os.environ,
            "AGENT_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
            "AGENT_DATA_DIR": str(tmp_path / "data"),
            "COLUMNS": "200",
        },
    )
    done = subprocess.run(
        [AGENTCTL, "doctor", "--only", "stores"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stderr
    said = " ".join(done.stdout.split())
    assert "FAIL stores cannot open our stores:" in said
    assert "needs the [postgres] extra" in said
    assert f"fix: {install_hint('postgres')}" in said
    assert "check AGENT_DATABASE_URL" not in said


def test_keys_new_prints_a_usable_entry():
    done = subprocess.run(
        [AGENTCTL, "keys", "new", "2026-12"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    from durable_agents.runtime.encryption import Keyring

    assert Keyring.parse(done.stdout).active == "2026-12"


async def test_only_checks_the_parts_asked_for(settings):
    findings = await diagnose(settings, {"stores", "encryption"})
    assert [f.part for f in findings] == ["stores", "encryption"]
    with pytest.raises(ValueError, match="no part named codec"):
        await diagnose(settings, {"codec"})


async def test_a_wedged_run_is_reported_with_its_failure_and_the_fix(worker, dev_env, settings):
    """A run of an agent no worker has: its first workflow task fails on every attempt.
    doctor names the run, the failure and the way out."""
    handle = await start_wedged_run(dev_env.client, settings.task_queue)
    finding = by_part(await diagnose(settings, {"runs"}))["runs"]
    assert not finding.ok
    assert handle.id in finding.says and "an-agent-no-worker-has" in finding.says
    assert "agentctl rewind" in finding.fix and "terminate" in finding.fix
    await handle.terminate("test over")
    assert by_part(await diagnose(settings, {"runs"}))["runs"].ok


async def test_plaintext_to_a_remote_address_is_flagged(settings):
    """doctor names the transport; plaintext to an address off this machine fails."""
    remote = settings.model_copy(update={"temporal_host": "temporal.example.com"})
    [transport] = await diagnose(remote, only={"transport"})
    assert not transport.ok and "plaintext to a remote address" in transport.says
    assert "TEMPORAL_TLS" in transport.fix
    keyed = remote.model_copy(update={"temporal_api_key": SecretStr("k" * 40)})
    [transport] = await diagnose(keyed, only={"transport"})
    assert transport.ok and transport.says.startswith("TLS with an API key to temporal.example")
