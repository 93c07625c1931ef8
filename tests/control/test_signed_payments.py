"""AGENT_REQUIRE_SIGNED_PAYMENTS: a worker starts the runs of an agent whose tools move
money with signed decisions required, trusting the keys made at set-up (`agentctl signing
console`, as docker-compose.yml's keys service makes them); an unsigned approval pays
nothing, the console key's pays. An agent that moves no money, or whose author already
asks for signatures, is left as written."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from durable_agents.control import runs
from durable_agents.control.runs import RunError
from durable_agents.control.signer import read_signer
from durable_agents.runtime.settings import Settings, SettingsInvalid
from durable_agents.worker.activities import payment_keys
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunPolicy, RunRequest, TrustedKey
from durable_agents.workflows.people_inputs import DecideRequest
from durable_agents.workflows.records import RunStatus
from durable_agents.workflows.registry import load_registry
from durable_agents.workflows.signed_payments import (
    money_tools,
    signed_for_payments,
    trusted_keys_from,
)
from durable_agents.workflows.signing import new_key
from tests.conftest import count_effects, run_id, wait_for_approval

AGENTCTL = str(Path(sys.executable).parent / "agentctl")


def console_key_made_at_setup(folder: Path) -> tuple[Path, Path]:
    """The console's signing key and the trusted keys file, as the set-up step makes them."""
    key = folder / "console-signing.key"
    env = {**os.environ, "AGENT_CONSOLE_SIGNING_KEY_FILE": str(key), "AGENT_DATA_DIR": str(folder)}
    made = subprocess.run(
        [AGENTCTL, "signing", "console"], env=env, capture_output=True, text=True, timeout=60
    )
    assert made.returncode == 0, made.stderr
    trusted = folder / "trusted-keys.json"
    trusted.write_text(made.stdout)
    return key, trusted


async def test_an_agent_that_moves_money_counts_only_signed_decisions(dev_env, settings, tmp_path):
    key, trusted = console_key_made_at_setup(tmp_path)
    signed = settings.model_copy(
        update={"require_signed_payments": True, "trusted_keys_file": trusted}
    )
    client = dev_env.client
    async with build_worker(client, signed):
        rid = run_id("signed-pay")
        request = RunRequest(goal="Pay INV-1001", label="pay-invoice")
        await runs.start_run(client, signed, request, rid)
        await wait_for_approval(client, rid)
        policy = (await runs.get_state(client, rid)).policy
        assert policy.require_signed_decisions
        assert set(policy.trusted_keys) == {"console"}

        with pytest.raises(RunError, match="unsigned"):
            await runs.decide(client, rid, DecideRequest(approve=True, by="alice"))
        assert count_effects(signed, rid, "charge") == 0

        console = read_signer(key, "console")
        await runs.decide(client, rid, DecideRequest(approve=True, by="alice"), console)
        outcome = await asyncio.wait_for(runs.wait_for_outcome(client, rid), 60)
        assert outcome["status"] == RunStatus.COMPLETED
        assert count_effects(signed, rid, "charge") == 1


def test_only_agents_that_move_money_are_tightened(tmp_path):
    registry = load_registry(
        ["durable_agents.examples.invoice", "durable_agents.examples.question"]
    )
    _, trusted = console_key_made_at_setup(tmp_path)
    keys = trusted_keys_from(trusted.read_text())
    invoice, question = registry.agent("invoice"), registry.agent("question")
    assert money_tools(invoice) == ["pay_invoice"] and money_tools(question) == []
    assert signed_for_payments(question, question.policy, keys) is question.policy
    tightened = signed_for_payments(invoice, invoice.policy, keys)
    assert tightened is not None and tightened.require_signed_decisions
    # An author's own signing policy stays the author's: no deployment key is added.
    _, public = new_key()
    own = RunPolicy(
        require_signed_decisions=True, trusted_keys={"cfo": TrustedKey(public_key=public)}
    )
    assert signed_for_payments(invoice, own, keys) is own
    with pytest.raises(ValueError, match="not JSON"):
        trusted_keys_from("console=abc")


def test_an_agent_that_delegates_to_one_that_moves_money_is_tightened(tmp_path):
    """A sub-agent runs under the policy its parent hands it: the desk, which moves no
    money itself, is signed because the refund agent it hands work to does."""
    registry = load_registry(["tests.control.paying_desk"])
    _, trusted = console_key_made_at_setup(tmp_path)
    keys = trusted_keys_from(trusted.read_text())
    desk = registry.agent("desk")
    assert all(tool.amount_field is None for tool in desk.all_tools)
    assert money_tools(desk) == ["refund.issue_refund"]
    tightened = signed_for_payments(desk, desk.policy, keys)
    assert tightened is not None and tightened.require_signed_decisions
    assert set(tightened.trusted_keys) == {"console"}


@pytest.mark.parametrize("text", ["{}", '{"trusted_keys": {}}'])
def test_a_trusted_keys_file_with_no_keys_is_refused(text: str, tmp_path: Path) -> None:
    """No keys would leave every money-moving agent unsigned while the flag says signed:
    the worker stops in one line instead of running them as if the flag were off."""
    with pytest.raises(ValueError, match=r"^no keys: give \{\"trusted_keys\""):
        trusted_keys_from(text)
    empty = tmp_path / "trusted-keys.json"
    empty.write_text(text)
    settings = Settings(data_dir=tmp_path, require_signed_payments=True, trusted_keys_file=empty)
    with pytest.raises(SettingsInvalid, match="no keys") as refused:
        payment_keys(settings)
    assert str(refused.value).startswith(f"AGENT_TRUSTED_KEYS_FILE {empty}: ")
    assert "\n" not in str(refused.value)


def test_a_missing_trusted_keys_file_stops_the_worker(tmp_path: Path) -> None:
    """A file named but not there (a volume not mounted, say) is no "no keys": the worker
    must not start the money-moving agents unsigned."""
    missing = tmp_path / "not-mounted" / "trusted-keys.json"
    settings = Settings(data_dir=tmp_path, require_signed_payments=True, trusted_keys_file=missing)
    with pytest.raises(SettingsInvalid) as refused:
        payment_keys(settings)
    said = str(refused.value)
    assert said == f"AGENT_TRUSTED_KEYS_FILE {missing}: No such file or directory", said


def test_signed_payments_without_a_trusted_keys_file_are_refused(tmp_path: Path) -> None:
    """The flag alone would sign nothing (there is no key to trust): the settings refuse
    it, naming both settings, rather than leave the worker to run payments unsigned."""
    with pytest.raises(ValidationError, match="AGENT_REQUIRE_SIGNED_PAYMENTS needs") as refused:
        Settings(data_dir=tmp_path, require_signed_payments=True)
    [problem] = refused.value.errors()
    assert "AGENT_TRUSTED_KEYS_FILE" in problem["msg"] and "\n" not in problem["msg"]
