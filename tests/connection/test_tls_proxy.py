"""Reaching Temporal through a TLS-terminating gRPC proxy, as a real cluster or Temporal
Cloud is reached: the worker with Temporal's own TEMPORAL_* variables, `agentctl` with our
AGENT_TEMPORAL_* settings, the console with a profile in Temporal's TOML file; a
pay-invoice run goes through its approval end to end. Without the client certificate,
with a CA that did not sign the server's, without or with a wrong API key, each says one
line and nothing starts."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from temporalio.service import RPCError

from durable_agents.console import users
from durable_agents.control import runs
from durable_agents.workflows.records import RunStatus
from tests.conftest import eventually, run_id, settings_for, spawn_worker
from tests.connection.proxy import API_KEY, Proxy, free_port, tls_proxy
from tests.console.live import PASSWORDS, LiveConsole, signed_in

AGENTCTL = str(Path(sys.executable).parent / "agentctl")


@pytest.fixture
def proxy(dev_env, tmp_path):
    with tls_proxy(dev_env.client.service_client.config.target_host, tmp_path / "proxy") as up:
        yield up


def _clean_env() -> dict[str, str]:
    """This process's environment without any TEMPORAL_* of the machine's own."""
    return {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}


def agentctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AGENTCTL, *args], env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def cli_env(settings, proxy: Proxy, **extra: str) -> dict[str, str]:
    """agentctl through the proxy with our own settings (mTLS unless `extra` says else)."""
    host, port = proxy.address.split(":")
    pki = proxy.pki
    return {
        **_clean_env(),
        "AGENT_DATA_DIR": str(settings.data_dir.resolve()),
        "AGENT_TASK_QUEUE": settings.task_queue,
        "AGENT_TEMPORAL_HOST": host,
        "AGENT_TEMPORAL_PORT": port,
        "AGENT_TEMPORAL_TLS_CA_FILE": str(pki.ca),
        "AGENT_TEMPORAL_TLS_CERT_FILE": str(pki.client_cert),
        "AGENT_TEMPORAL_TLS_KEY_FILE": str(pki.client_key),
        **extra,
    }


async def test_worker_cli_and_console_run_a_payment_through_an_mtls_proxy(
    dev_env, model_server, tmp_path, proxy
):
    settings = settings_for(dev_env.client, tmp_path / "data", model_server.port)
    pki = proxy.pki
    host, port = proxy.address.split(":")
    # The worker: Temporal's own variables (its address too: ours are left unset).
    worker_env = {
        "TEMPORAL_ADDRESS": proxy.address,
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(pki.ca),
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(pki.client_cert),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(pki.client_key),
    }
    worker_settings = settings.model_copy(
        update={"temporal_host": host, "temporal_port": int(port)}
    )
    worker = spawn_worker(worker_settings, tmp_path / "worker.log", **worker_env)
    # The console: a profile of Temporal's TOML file.
    profile = tmp_path / "temporal.toml"
    profile.write_text(
        f'[profile.prod]\naddress = "{proxy.address}"\nnamespace = "default"\n'
        f'[profile.prod.tls]\nserver_ca_cert_path = "{pki.ca}"\n'
        f'client_cert_path = "{pki.client_cert}"\nclient_key_path = "{pki.client_key}"\n'
    )
    try:
        env = cli_env(settings, proxy)
        rid = run_id("tls")
        started = agentctl(
            env, "run", "Pay INV-1001", "--agent", "before-agents", "--scenario", "pay-invoice",
            "--id", rid, "--json",
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        assert json.loads(started.stdout)["run_id"] == rid

        async def waiting():
            summary = await runs.get_summary(dev_env.client, rid)
            return summary if summary.pending_approvals else None

        await eventually(waiting, within=60)
        doctor = agentctl(env, "doctor", "--only", "transport")
        assert "mTLS (client certificate) to 127.0.0.1" in doctor.stdout, doctor.stdout

        console = await start_console(settings, tmp_path / "console.log", {
            "TEMPORAL_CONFIG_FILE": str(profile), "TEMPORAL_PROFILE": "prod",
        })  # fmt: skip
        try:
            http, token = await signed_in(console.live, "alice")
            page = await http.get(f"/runs/{rid}")
            assert page.status_code == 200 and "pay_invoice" in page.text
            request_id = (await waiting()).pending_approvals[0].request_id
            form = {"csrf": token, "request_id": request_id, "decision": "approve"}
            assert (await http.post(f"/runs/{rid}/decide", data=form)).status_code == 303
        finally:
            console.stop()
        outcome = await asyncio.wait_for(runs.wait_for_outcome(dev_env.client, rid), 60)
        assert outcome["status"] == RunStatus.COMPLETED
        shown = agentctl(env, "show", rid, "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["approvals"][0]["decided_by"] == "alice"
    finally:
        worker.terminate()
        await asyncio.to_thread(worker.wait, 30)


async def test_wrong_credentials_say_one_line_and_start_nothing(dev_env, tmp_path, proxy):
    settings = settings_for(dev_env.client, tmp_path / "data", 1)
    pki = proxy.pki
    key_port = proxy.api_key_address.split(":")[1]
    keyed = {"AGENT_TEMPORAL_PORT": key_port, "AGENT_TEMPORAL_TLS_CERT_FILE": "",
             "AGENT_TEMPORAL_TLS_KEY_FILE": ""}  # fmt: skip
    cases = {
        "no client certificate": (
            {"AGENT_TEMPORAL_TLS_CERT_FILE": "", "AGENT_TEMPORAL_TLS_KEY_FILE": ""},
            "wants a client certificate",
        ),
        "a CA that did not sign the server's": (
            {"AGENT_TEMPORAL_TLS_CA_FILE": str(pki.other_ca)},
            "not signed by a CA this client trusts",
        ),
        "no API key": (keyed, "a missing or wrong API key"),
        "a wrong API key": (
            {**keyed, "AGENT_TEMPORAL_API_KEY": "not-the-key-0123456789"},
            "a missing or wrong API key",
        ),
        "a client certificate without its key": (
            {"AGENT_TEMPORAL_TLS_KEY_FILE": ""},
            "mTLS needs both",
        ),
        "an API key with TLS off": (
            {
                **keyed,
                "AGENT_TEMPORAL_API_KEY": API_KEY,
                "AGENT_TEMPORAL_TLS_CA_FILE": "",
                "AGENT_TEMPORAL_TLS": "false",
            },
            "a Temporal API key is never sent without TLS",
        ),
        "plaintext to the TLS port": (
            {
                "AGENT_TEMPORAL_TLS_CA_FILE": "",
                "AGENT_TEMPORAL_TLS_CERT_FILE": "",
                "AGENT_TEMPORAL_TLS_KEY_FILE": "",
                "AGENT_TEMPORAL_TLS": "false",
            },
            "if the server speaks TLS, set TEMPORAL_TLS=true",
        ),
    }
    tried = []
    for case, (extra, says) in cases.items():
        env = {k: v for k, v in cli_env(settings, proxy, **extra).items() if v != ""}
        rid = run_id("refused")
        tried.append(rid)
        result = await asyncio.to_thread(
            agentctl,
            env,
            "run",
            "Pay",
            "--agent",
            "before-agents",
            "--scenario",
            "pay-invoice",
            "--id",
            rid,
        )
        assert result.returncode == 1, (case, result.stdout)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (case, result.stderr)
        assert says in lines[0], (case, lines[0])
    # The right key through the same door works, so the refusals were the credentials'.
    env = cli_env(settings, proxy, AGENT_TEMPORAL_API_KEY=API_KEY, **keyed)
    env = {k: v for k, v in env.items() if v != ""}
    listed = await asyncio.to_thread(agentctl, env, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    known = {r["run_id"] for r in json.loads(listed.stdout)}
    assert not known & set(tried)  # nothing started
    for rid in tried:
        with pytest.raises(RPCError):
            await dev_env.client.get_workflow_handle(rid).describe()


@dataclass
class RunningConsole:
    live: LiveConsole
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


async def start_console(settings, log_path: Path, extra: dict[str, str]) -> RunningConsole:
    """`python -m durable_agents.console` as production runs it, with the given connection
    settings only."""
    for name, password in PASSWORDS.items():
        users.add_user(settings.console_users_path, name, password)
    port = free_port()
    env = {
        **_clean_env(),
        "AGENT_DATA_DIR": str(settings.data_dir.resolve()),
        "AGENT_TASK_QUEUE": settings.task_queue,
        "AGENT_CONSOLE_PORT": str(port),
        **extra,
    }
    process = _spawn([sys.executable, "-m", "durable_agents.console"], env, log_path)
    live = LiveConsole(f"http://127.0.0.1:{port}", settings)

    async def healthy() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"the console exited: {_tail(log_path)}")
        try:
            async with live.client() as http:
                return (await http.get("/health")).status_code == 200
        except httpx.HTTPError:
            return False

    await eventually(healthy, within=60)
    return RunningConsole(live, process)


def _spawn(command: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )


def _tail(path: Path) -> str:
    return path.read_text()[-2000:]
