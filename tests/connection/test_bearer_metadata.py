"""Bearer metadata, like the API key, is never sent without TLS: `TEMPORAL_GRPC_META_*`
or a profile's `grpc_meta` carrying a credential is refused in one line by the worker,
`agentctl` and the console before anything connects, on loopback too; over TLS it goes
through, and the proxy lets in the request it authorizes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from durable_agents.runtime.connection import (
    ConnectionSettingsError,
    bearer_metadata,
    connection,
)
from durable_agents.runtime.settings import Settings
from tests.conftest import settings_for
from tests.connection.proxy import API_KEY, tls_proxy

AGENTCTL = str(Path(sys.executable).parent / "agentctl")
REFUSAL = "is never sent without TLS: turn TLS on, or drop the header"


def agentctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AGENTCTL, *args], env=env, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


class Door:
    """A plain TCP listener on loopback that counts who knocks and shuts on them: where a
    client that sent its metadata would have connected."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port: int = self.sock.getsockname()[1]
        self.knocks = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            self.knocks += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


@contextmanager
def door() -> Iterator[Door]:
    opened = Door()
    try:
        yield opened
    finally:
        opened.close()


def plain_env(tmp_path: Path, port: int, **extra: str) -> dict[str, str]:
    """Every process's settings towards the door, plaintext, with no TEMPORAL_* of the
    machine's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "AGENT_"))}
    return {
        **env,
        "AGENT_DATA_DIR": str(tmp_path / "data"),
        "AGENT_TEMPORAL_HOST": "127.0.0.1",
        "AGENT_TEMPORAL_PORT": str(port),
        "AGENT_METRICS_PORT": "0",
        **extra,
    }


def profile_file(tmp_path: Path, meta: dict[str, str]) -> Path:
    """Temporal's TOML file with a profile `prod` whose grpc_meta is `meta`, no TLS."""
    lines = ["[profile.prod]", 'namespace = "default"', "[profile.prod.grpc_meta]"]
    lines += [f"{name} = {json.dumps(value)}" for name, value in meta.items()]
    path = tmp_path / "temporal.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


PROCESSES = {
    "agentctl": [AGENTCTL, "list"],
    "worker": [sys.executable, "-m", "durable_agents.worker"],
    "console": [sys.executable, "-m", "durable_agents.console"],
}


def test_bearer_metadata_without_tls_is_refused_before_anything_connects(tmp_path):
    bearer = f"Bearer {API_KEY}"
    with door() as temporal:
        cases = {
            "TEMPORAL_GRPC_META_AUTHORIZATION": (
                {"TEMPORAL_GRPC_META_AUTHORIZATION": bearer},
                "bearer metadata (authorization)",
            ),
            "the same with TLS said off": (
                {"TEMPORAL_GRPC_META_AUTHORIZATION": bearer, "AGENT_TEMPORAL_TLS": "false"},
                "bearer metadata (authorization)",
            ),
            "a profile's grpc_meta Authorization": (
                {
                    "TEMPORAL_CONFIG_FILE": str(profile_file(tmp_path, {"Authorization": bearer})),
                    "TEMPORAL_PROFILE": "prod",
                },
                "bearer metadata (authorization)",
            ),
        }
        for case, (extra, says) in cases.items():
            for process, command in PROCESSES.items():
                env = plain_env(tmp_path, temporal.port, **extra)
                done = subprocess.run(
                    command, env=env, capture_output=True, text=True, timeout=120,
                    stdin=subprocess.DEVNULL,
                )  # fmt: skip
                said = (done.stdout + done.stderr).strip()
                assert done.returncode != 0, (case, process, said)
                assert f"{says} {REFUSAL}" in said, (case, process, said)
                assert bearer not in said  # the refusal names the header, not its value
                if process == "agentctl":
                    assert said == f"error: {says} {REFUSAL}", (case, said)
        assert temporal.knocks == 0  # nothing was sent, to loopback either


def test_what_counts_as_bearer_metadata(tmp_path, monkeypatch):
    """A credential under any name (a `Bearer`/`Basic` value), `authorization` in any case;
    metadata that carries none still goes plaintext."""
    for name in [k for k in os.environ if k.startswith("TEMPORAL_")]:
        monkeypatch.delenv(name)
    (tmp_path / "empty.toml").write_text("")
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "empty.toml"))
    settings = Settings(data_dir=tmp_path)
    monkeypatch.setenv("TEMPORAL_GRPC_META_X_TENANT", "acme")
    assert connection(settings).rpc_metadata == {"x-tenant": "acme"}
    monkeypatch.setenv("TEMPORAL_GRPC_META_X_GATEWAY_AUTH", "basic YWxpY2U6cHc=")
    with pytest.raises(ConnectionSettingsError, match=r"^bearer metadata \(x-gateway-auth\) is"):
        connection(settings)
    monkeypatch.delenv("TEMPORAL_GRPC_META_X_GATEWAY_AUTH")
    monkeypatch.setenv("TEMPORAL_GRPC_META_AUTHORIZATION", "token-without-a-scheme")
    with pytest.raises(ConnectionSettingsError, match=r"^bearer metadata \(authorization\) is"):
        connection(settings)
    tls_on = settings.model_copy(update={"temporal_tls": True})
    assert connection(tls_on).rpc_metadata["authorization"] == "token-without-a-scheme"


@pytest.mark.parametrize(
    "metadata",
    [
        {"Authorization": "token"},
        {"AUTHORIZATION": "token"},
        {"authorization": "token"},
        {"Proxy-Authorization": "token"},
        {"x-gateway-auth": "bearer x"},
        {"x-gateway-auth": "BEARER x"},
        {"x-gateway-auth": "Basic y"},
        {"x-gateway-auth": "basic y"},
        {"x-gateway-auth": " Bearer x"},
        {"x-gateway-auth": "\tbasic y"},
    ],
)
def test_a_credential_counts_in_any_case(metadata):
    """gRPC metadata names and HTTP scheme names are case-insensitive: a profile's
    `Authorization` or a gateway's `BEARER …` is a credential like any other spelling,
    and so is one behind the whitespace a careless env file or TOML string leaves."""
    assert bearer_metadata({"x-tenant": "acme", **metadata}) == list(metadata)


async def test_bearer_metadata_over_tls_is_sent_and_lets_the_request_in(dev_env, tmp_path):
    """Through the proxy's door that checks the API key as a bearer token: metadata
    carrying it, over TLS, is what authorizes the request."""
    upstream = dev_env.client.service_client.config.target_host
    with tls_proxy(upstream, tmp_path / "proxy") as proxy:
        settings = settings_for(dev_env.client, tmp_path / "data", 1)
        env = plain_env(
            tmp_path,
            int(proxy.api_key_address.split(":")[1]),
            AGENT_TASK_QUEUE=settings.task_queue,
            AGENT_TEMPORAL_TLS_CA_FILE=str(proxy.pki.ca),
        )
        refused = agentctl(env, "list", "--json")  # no credential: the proxy says 401
        assert refused.returncode == 1 and "a missing or wrong API key" in refused.stderr
        env["TEMPORAL_GRPC_META_AUTHORIZATION"] = f"Bearer {API_KEY}"
        listed = agentctl(env, "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert isinstance(json.loads(listed.stdout), list)
        doctor = agentctl(env, "doctor", "--only", "transport")
        assert f"TLS to {proxy.api_key_address}" in doctor.stdout, doctor.stdout
