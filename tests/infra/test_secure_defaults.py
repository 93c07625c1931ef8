"""Secure by default where it is deployed: docker-compose.yml and infra/k8s/ seal inputs
with payload keys made at set-up and require signed decisions for agents that move money,
each with a comment saying how to turn it off. The keys service's script and the
ConfigMap's commands are run here for real, and what they make is what the worker and
`agentctl doctor` read. (Parsed with PyYAML, as tests/infra/test_deployment_files.py.)"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from durable_agents.control.doctor import diagnose
from durable_agents.runtime.encryption import keyring_from
from durable_agents.runtime.settings import Settings
from durable_agents.worker.activities import payment_keys
from tests.infra.test_deployment_files import (
    COMPOSE,
    ROOT,
    compose,
    config_map,
    containers,
    k8s_documents,
)

PROTECTIONS = ("AGENT_REQUIRE_SEALED_INPUTS", "AGENT_REQUIRE_SIGNED_PAYMENTS")
KEY_FILES = ("AGENT_ENCRYPTION_KEYS_FILE", "AGENT_TRUSTED_KEYS_FILE")
CONFIG_MAP = ROOT / "infra/k8s/configmap.yaml"


def _mount_of(path: str, mounts: dict[str, str]) -> str | None:
    """The volume (or Secret) a file path lies under, from {mount path: volume}."""
    for where, volume in mounts.items():
        if path.startswith(where.rstrip("/") + "/"):
            return volume
    return None


def compose_mounts(service: dict[str, Any]) -> dict[str, str]:
    found = {}
    for entry in service.get("volumes", []):
        volume, where, *_ = entry.split(":")
        found[where] = volume
    return found


def test_compose_seals_inputs_and_signs_payments_with_keys_made_at_set_up():
    services = compose()["services"]
    keys = services["keys"]
    made_in = {
        name: _mount_of(keys["environment"][name], compose_mounts(keys)) for name in KEY_FILES
    }
    assert made_in == {name: "keys" for name in KEY_FILES}
    for name in ("setup", "worker", "console"):
        service = services[name]
        env = service["environment"]
        assert {env[p] for p in PROTECTIONS} == {"true"}, name
        for setting in KEY_FILES:
            assert env[setting] == keys["environment"][setting], (name, setting)
            assert _mount_of(env[setting], compose_mounts(service)) == "keys", (name, setting)
        assert "keys:/keys:ro" in service["volumes"], name  # they read; only `keys` writes
    codec = services["codec"]
    assert _mount_of(codec["environment"]["AGENT_ENCRYPTION_KEYS_FILE"], compose_mounts(codec))
    # The keys exist before anything of ours starts; the worker never sees the console's
    # private key.
    assert services["setup"]["depends_on"]["keys"]["condition"] == "service_completed_successfully"
    assert services["codec"]["depends_on"]["keys"]["condition"] == "service_completed_successfully"
    signing_key = services["console"]["environment"]["AGENT_CONSOLE_SIGNING_KEY_FILE"]
    assert keys["environment"]["AGENT_CONSOLE_SIGNING_KEY_FILE"] == signing_key
    assert "console-data" not in compose_mounts(services["worker"]).values()


def test_the_keys_service_makes_keys_once_that_the_worker_and_doctor_take(tmp_path):
    """Its script, run with its volumes as folders here: the worker takes the keys it
    makes, doctor names no protection off, and a second run changes nothing."""
    services = compose()["services"]
    keys = services["keys"]
    assert keys["command"][:2] == ["sh", "-ec"]
    script = keys["command"][2].replace("$$", "$")  # compose's escape for a literal $
    here = {"/keys": tmp_path / "keys", "/data": tmp_path / "console-data"}
    for folder in here.values():
        folder.mkdir()

    def local(value: str) -> str:
        for where, folder in here.items():
            if value.startswith(where + "/"):
                return str(folder / value.removeprefix(where + "/"))
        return value

    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env |= {name: local(value) for name, value in keys["environment"].items()}
    for _ in range(2):
        done = subprocess.run(["sh", "-ec", script], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        if _ == 0:
            made = {p.name: p.read_text() for p in (tmp_path / "keys").iterdir()}
    assert {p.name: p.read_text() for p in (tmp_path / "keys").iterdir()} == made
    assert set(made) == {"encryption-keys", "trusted-keys.json"}  # no .new left behind
    assert (tmp_path / "console-data" / "console-signing.key").exists()

    worker = services["worker"]["environment"]
    settings = Settings.model_validate(
        {
            "encryption_keys_file": local(worker["AGENT_ENCRYPTION_KEYS_FILE"]),
            "require_sealed_inputs": worker["AGENT_REQUIRE_SEALED_INPUTS"],
            "require_signed_payments": worker["AGENT_REQUIRE_SIGNED_PAYMENTS"],
            "trusted_keys_file": local(worker["AGENT_TRUSTED_KEYS_FILE"]),
            "data_dir": tmp_path,
        }
    )
    keyring = keyring_from(settings)
    assert keyring is not None and keyring.active == "k1"
    assert set(payment_keys(settings)) == {"console"}
    [finding] = asyncio.run(diagnose(settings, {"protections"}))
    assert finding.ok and finding.says.startswith("on:"), finding


def k8s_mounts(doc: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """{mount path: Secret name} of a container's Secret volumes."""
    volumes = {
        v["name"]: v["secret"]["secretName"]
        for v in doc["spec"]["template"]["spec"].get("volumes", [])
        if "secret" in v
    }
    return {
        m["mountPath"]: volumes[m["name"]]
        for m in container.get("volumeMounts", [])
        if m["name"] in volumes
    }


def test_kubernetes_seals_inputs_and_signs_payments_with_the_keys_secret():
    data = config_map()
    assert {data[p] for p in PROTECTIONS} == {"true"}
    seen = set()
    for doc in k8s_documents():
        for container in (
            doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
        ):
            if container["name"] not in {"worker", "console", "setup", "codec"}:
                continue
            seen.add(container["name"])
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            if container.get("envFrom"):
                env = {**data, **env}
            mounts = k8s_mounts(doc, container)
            files = KEY_FILES if container["name"] != "codec" else KEY_FILES[:1]
            for setting in files:
                assert _mount_of(env[setting], mounts) == "durable-agents-keys", (
                    container["name"],
                    setting,
                )
    assert seen == {"worker", "console", "setup", "codec"}
    assert {c["name"] for c in containers()} >= seen


def _commands_in(header: str) -> list[str]:
    """The shell commands of a comment block: `#   command \\` lines joined."""
    lines = [line[1:].strip() for line in header.splitlines() if line.startswith("#   ")]
    joined = re.sub(r"\\\s*\n\s*", " ", "\n".join(lines))
    return joined.splitlines()


def test_the_config_maps_commands_make_the_secret_its_mounts_read(tmp_path):
    """The commands the ConfigMap's header gives, run here: they make the files the
    Secret is created from, under the names the settings read."""
    header = CONFIG_MAP.read_text().split("apiVersion:")[0]
    commands = _commands_in(header)
    making = [c for c in commands if "agentctl keys new" in c or "agentctl signing console" in c]
    assert len(making) == 2, commands
    [create] = [c for c in commands if "create secret generic durable-agents-keys" in c]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for command in making:
        done = subprocess.run(
            ["sh", "-ec", command], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, (command, done.stderr)
    data = config_map()
    for setting in KEY_FILES:
        name = Path(data[setting]).name
        assert f"--from-file={name}" in create, (setting, create)
        assert (tmp_path / name).read_text().strip(), name
    settings = Settings(
        data_dir=tmp_path,
        encryption_keys_file=tmp_path / "encryption-keys",
        require_signed_payments=True,
        trusted_keys_file=tmp_path / "trusted-keys.json",
    )
    assert keyring_from(settings) is not None and set(payment_keys(settings)) == {"console"}
    assert (tmp_path / "console-signing.key").exists()  # for the console's own Secret


def test_each_protection_says_how_to_turn_it_off():
    for path in (COMPOSE, CONFIG_MAP):
        lines = path.read_text().splitlines()
        for setting in PROTECTIONS:
            at = next(i for i, line in enumerate(lines) if line.strip().startswith(setting + ":"))
            above = []
            for line in reversed(lines[:at]):
                if not line.strip().startswith("#"):
                    if not line.strip().startswith(KEY_FILES):
                        break
                    continue
                above.append(line)
            comment = " ".join(reversed(above))
            assert "Off:" in comment and f"{setting} " in comment, (path.name, setting)
