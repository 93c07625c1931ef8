"""agentctl doctor names each protection a production deployment turns on that is off
here, a line each, as a warning that does not fail it: sealed inputs, and signed decisions
for each agent whose tools move money. With them on it names none; signing turned on with
a trusted keys file the worker cannot use fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pydantic import SecretStr

from durable_agents.control.doctor import diagnose
from durable_agents.runtime.encryption import new_key
from durable_agents.runtime.settings import Settings
from tests.control.test_signed_payments import console_key_made_at_setup

AGENTCTL = str(Path(sys.executable).parent / "agentctl")
MODULES = "durable_agents.examples.invoice,durable_agents.examples.refund," + (
    "durable_agents.examples.question"
)


def plain(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path, modules=MODULES)


async def test_without_keys_doctor_fails_unless_told_the_namespace_is_ours_alone(tmp_path):
    [keys, *_] = await diagnose(plain(tmp_path), {"protections"})
    assert not keys.ok and keys.says.startswith("no keys: a worker with our plugin refuses")
    assert "agentctl keys new k1 --file keys" in keys.fix
    alone = plain(tmp_path).model_copy(update={"namespace_is_ours_alone": True})
    [keys, *_] = await diagnose(alone, {"protections"})
    assert keys.ok and keys.says.startswith("keys off (AGENT_NAMESPACE_IS_OURS_ALONE)")


async def test_each_protection_that_is_off_is_named_on_a_line_of_its_own(tmp_path):
    alone = plain(tmp_path).model_copy(update={"namespace_is_ours_alone": True})
    [_, *findings] = await diagnose(alone, {"protections"})
    assert all(f.ok and f.part == "protections" for f in findings)  # warnings, not failures
    says = [f.says for f in findings]
    assert len(says) == 3, says
    assert says[0].startswith("sealed inputs off (and payloads are not encrypted)")
    assert "AGENT_REQUIRE_SEALED_INPUTS=true" in findings[0].fix
    assert says[1].startswith("signed decisions off for agent invoice, whose tools move money")
    assert "(pay_invoice)" in says[1]
    assert says[2].startswith("signed decisions off for agent refund") and "issue_refund" in says[2]
    assert not any("question" in line for line in says)  # it moves no money
    assert all("AGENT_REQUIRE_SIGNED_PAYMENTS=true" in f.fix for f in findings[1:])

    keyed = plain(tmp_path).model_copy(update={"encryption_keys": SecretStr(f"k1={new_key()}")})
    [sealing, *_] = await diagnose(keyed, {"protections"})
    assert sealing.says.startswith("sealed inputs off: a start, signal or update made without")


async def test_with_every_protection_on_none_is_named(tmp_path):
    _, trusted = console_key_made_at_setup(tmp_path)
    protected = plain(tmp_path).model_copy(
        update={
            "encryption_keys": SecretStr(f"k1={new_key()}"),
            "require_sealed_inputs": True,
            "require_signed_payments": True,
            "trusted_keys_file": trusted,
        }
    )
    [finding] = await diagnose(protected, {"protections"})
    assert finding.ok and " off" not in finding.says and finding.says.startswith("on:")

    trusted.write_text('{"trusted_keys": {"console": {"public_key": "short"}}}')
    [broken] = await diagnose(protected, {"protections"})
    assert not broken.ok and "AGENT_TRUSTED_KEYS_FILE" in broken.says
    assert "the worker will not start" in broken.says


def test_a_protection_off_does_not_fail_the_command(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    env |= {
        "AGENT_DATA_DIR": str(tmp_path),
        "AGENT_MODULES": MODULES,
        "AGENT_NAMESPACE_IS_OURS_ALONE": "true",
    }
    done = subprocess.run(
        [AGENTCTL, "doctor", "--only", "protections"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if "protections" in line]
    assert len(lines) == 4 and all(" off" in line for line in lines), done.stdout


async def test_an_agent_that_hands_money_to_a_sub_agent_is_named(tmp_path):
    """The desk moves no money itself but delegates to the refund agent, which does: its
    runs hand their unsigned policy down, so doctor names the desk too."""
    settings = Settings(data_dir=tmp_path, modules="tests.control.paying_desk")
    says = [f.says for f in await diagnose(settings, {"protections"})]
    named = [line for line in says if line.startswith("signed decisions off for agent desk,")]
    assert len(named) == 1 and "(refund.issue_refund)" in named[0], says
    assert any(line.startswith("signed decisions off for agent refund,") for line in says)


async def test_a_trusted_keys_file_without_the_flag_is_no_protection(tmp_path):
    """The worker signs money-moving agents only with AGENT_REQUIRE_SIGNED_PAYMENTS on: a
    keys file set without it signs nothing, so doctor still names each such agent."""
    _, trusted = console_key_made_at_setup(tmp_path)
    keys_only = plain(tmp_path).model_copy(update={"trusted_keys_file": trusted})
    says = [f.says for f in await diagnose(keys_only, {"protections"})]
    assert any(line.startswith("signed decisions off for agent invoice,") for line in says), says
    assert any(line.startswith("signed decisions off for agent refund,") for line in says), says
