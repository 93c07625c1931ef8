"""The deployment files, checked without Docker or Kubernetes (neither runs here): they
parse, our services' environment is exactly what the settings model reads and its values
validate, images are pinned, shutdown gives activities in flight time to finish, and the
image holds the extras of every command they run from it."""

from __future__ import annotations

import ast
import asyncio
import base64
import importlib.util
import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

from durable_agents.runtime.encryption import new_key
from durable_agents.runtime.extras import DISTRIBUTION, EXTRAS
from durable_agents.runtime.settings import Settings
from durable_agents.starters.cli import app

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
K8S = sorted((ROOT / "infra" / "k8s").glob("*.yaml"))
OUR_IMAGE = "durable-agents:0.1.0"
# What `${VAR}` references and Secret keys stand for when the values are validated.
SAMPLES = {
    "AGENT_ENCRYPTION_KEYS": f"k1={new_key()}",
    "AGENT_CODEC_TOKEN": "a-codec-token-of-32-bytes-or-more-0123456789",
    "AGENT_CODEC_UI_TOKEN": "the-web-uis-own-token-of-32-bytes-0123456789",
    "AGENT_CONSOLE_SECRET": "a-console-secret-of-32-bytes-or-more-012345",
    "OPENAI_API_KEY": "sk-sample",
    "AGENT_DATABASE_URL": "postgresql://agents:pw@postgres:5432/agents",
    "AGENT_TEMPORAL_API_KEY": "a-temporal-api-key-0123456789",
}


def setting_variables() -> set[str]:
    """Every environment variable the settings model reads."""
    names = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        choices = getattr(alias, "choices", None)
        names |= set(choices) if choices else {f"AGENT_{name.upper()}"}
    return names


def interpolate(value: str) -> str:
    """Compose's ${NAME}, ${NAME:?message} and ${NAME:-default}, from SAMPLES."""
    return re.sub(r"\$\{(\w+)(?::[?-][^}]*)?\}", lambda m: SAMPLES[m.group(1)], value)


# Where the files mounted at /keys (the keys volume, the Secret durable-agents-keys) are
# here: the sample payload keys, and a trusted keys file (tests/infra/test_secure_defaults.py
# makes real ones with the files' own commands).
KEYS_MOUNT = "/keys/"
_sample_keys: list[Path] = []


@pytest.fixture(autouse=True, scope="module")
def _mounted_keys(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keys")
    (folder / "encryption-keys").write_text(SAMPLES["AGENT_ENCRYPTION_KEYS"])
    (folder / "trusted-keys.json").write_text("{}")
    _sample_keys[:] = [folder]


def mounted(value: str) -> str:
    """A path under /keys as the sample file here."""
    if value.startswith(KEYS_MOUNT):
        return str(_sample_keys[0] / value.removeprefix(KEYS_MOUNT))
    return value


def validate(env: dict[str, str], monkeypatch) -> Settings:
    for key in setting_variables():
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, mounted(value))
    return Settings()


def compose() -> Any:
    return yaml.safe_load(COMPOSE.read_text())


def k8s_documents() -> list[Any]:
    return [doc for path in K8S for doc in yaml.safe_load_all(path.read_text()) if doc]


def containers() -> list[Any]:
    found = []
    for doc in k8s_documents():
        spec = doc.get("spec", {}).get("template", {}).get("spec", {})
        found += spec.get("containers", [])
    return found


def config_map() -> Any:
    [cm] = [d for d in k8s_documents() if d["kind"] == "ConfigMap"]
    return cm["data"]


def test_every_file_parses():
    assert compose()["services"]
    kinds = [doc["kind"] for doc in k8s_documents()]
    assert sorted(kinds) == [
        "ConfigMap",
        "Deployment",
        "Deployment",
        "Deployment",
        "Job",
        "Service",
        "Service",
    ]
    for path in (ROOT / "infra" / "compose").glob("*.y*ml"):
        assert yaml.safe_load(path.read_text()), path


def pinned(image: str) -> bool:
    if "@sha256:" in image:
        return True
    _, _, tag = image.rpartition(":")
    return bool(tag) and "/" not in tag and tag != "latest" and any(c.isdigit() for c in tag)


def test_every_image_is_pinned():
    images = [s["image"] for s in compose()["services"].values()]
    images += [c["image"] for c in containers()]
    images += re.findall(r"^FROM\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert len(images) >= 10
    assert [i for i in images if not pinned(i)] == []


def test_compose_services_of_our_image_read_only_settings(monkeypatch):
    ours = {n: s for n, s in compose()["services"].items() if s.get("image") == OUR_IMAGE}
    assert set(ours) == {"keys", "setup", "codec", "worker", "console"}
    known = setting_variables()
    for name, service in ours.items():
        env = {k: interpolate(str(v)) for k, v in service["environment"].items()}
        assert set(env) - known == set(), name
        settings = validate(env, monkeypatch)
        if name == "worker":
            assert settings.temporal_address == "temporal:7233"
            assert settings.encryption_on and settings.database_url
            assert settings.trace_exporters == {"otlp"}
            assert settings.metrics_port == 9464
        if name == "codec":
            assert settings.ui_origins == ["http://localhost:8080"]
        if name == "console":
            assert settings.console_url == "http://0.0.0.0:8280" and settings.encryption_on
            assert settings.openai_api_key is None


def test_compose_wires_the_ui_to_the_codec_server_and_prometheus_to_the_workers():
    services = compose()["services"]
    codec_port = services["codec"]["environment"]["AGENT_CODEC_PORT"]
    endpoint = interpolate(services["ui"]["environment"]["TEMPORAL_CODEC_ENDPOINT"])
    assert endpoint == f"http://localhost:{codec_port}/ui/{SAMPLES['AGENT_CODEC_UI_TOKEN']}"
    assert "container_name" not in services["worker"]  # --scale worker=N
    assert "ports" not in services["worker"]
    prometheus = yaml.safe_load((ROOT / "infra/compose/prometheus.yml").read_text())
    [job] = prometheus["scrape_configs"]
    assert job["dns_sd_configs"][0]["names"] == ["worker"]
    assert job["dns_sd_configs"][0]["port"] == int(
        services["worker"]["environment"]["AGENT_METRICS_PORT"]
    )
    collector = yaml.safe_load((ROOT / "infra/compose/otel-collector.yaml").read_text())
    assert "http" in collector["receivers"]["otlp"]["protocols"]
    assert services["worker"]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"].endswith(":4318")


def test_kubernetes_settings_match_the_model(monkeypatch):
    known = setting_variables()
    data = config_map()
    assert set(data) - known == set()
    for container in containers():
        if container["image"] != OUR_IMAGE:
            continue  # a sidecar of someone else's (the console's oauth2-proxy)
        names = [e["name"] for e in container.get("env", [])]
        assert set(names) - known == set(), container["name"]
        env = dict(data) if container.get("envFrom") else {}
        for entry in container.get("env", []):
            env[entry["name"]] = entry.get("value") or SAMPLES[entry["name"]]
        validate(env, monkeypatch)
        # Secrets come from the Secret, never from the ConfigMap or a literal.
        secrets = ("OPENAI_API_KEY", "AGENT_ENCRYPTION_KEYS", "AGENT_CODEC_TOKEN")
        for secret in (*secrets, "AGENT_CODEC_UI_TOKEN"):
            literal = [e for e in container.get("env", []) if e["name"] == secret and "value" in e]
            assert not literal and secret not in data


def test_every_process_that_reaches_temporal_reads_the_same_transport_settings():
    """The worker, the console and the set-up job (and their readiness checks, run in the
    same containers) take Temporal's address and TLS from the ConfigMap and its API key
    from the Secret: none can be left plaintext, or keyless, by a file of its own."""
    talking = {"worker", "console", "setup"}
    seen = set()
    for container in containers():
        if container["name"] not in talking:
            continue
        seen.add(container["name"])
        assert container["envFrom"] == [{"configMapRef": {"name": "durable-agents"}}]
        [key] = [e for e in container["env"] if e["name"] == "AGENT_TEMPORAL_API_KEY"]
        ref = key["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "durable-agents", "key": "AGENT_TEMPORAL_API_KEY", "optional": True}
        transport = [e["name"] for e in container["env"] if e["name"].startswith("AGENT_TEMPORAL")]
        assert transport == ["AGENT_TEMPORAL_API_KEY"], container["name"]  # nothing of its own
        probe = container.get("readinessProbe", {}).get("exec", {}).get("command", [])
        assert not probe or probe[0] == "agentctl"  # the same environment, the same settings
    assert seen == talking


@pytest.mark.parametrize("grace", ["compose", "kubernetes"])
def test_shutdown_lets_activities_in_flight_finish(grace):
    if grace == "compose":
        worker = compose()["services"]["worker"]
        allowed = int(worker["stop_grace_period"].rstrip("s"))
        own = float(worker["environment"]["AGENT_GRACEFUL_SHUTDOWN_SECONDS"])
    else:
        [deployment] = [
            d for d in k8s_documents() if d["metadata"]["name"] == "durable-agents-worker"
        ]
        allowed = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        own = float(config_map()["AGENT_GRACEFUL_SHUTDOWN_SECONDS"])
    assert allowed > own > 0


def test_every_command_the_files_run_exists():
    commands = [s["command"] for s in compose()["services"].values() if "command" in s]
    commands += [c["command"] for c in containers() if c["image"] == OUR_IMAGE]
    for container in containers():
        probe = container.get("readinessProbe", {})
        if "exec" in probe:
            commands.append(probe["exec"]["command"])
    commands.append(compose()["services"]["worker"]["healthcheck"]["test"][1:])
    cmd = re.search(r"^CMD (\[.*\])$", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    assert cmd is not None
    commands.append(json.loads(cmd.group(1)))
    verbs = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    ours = 0
    for command in commands:
        if command[:2] == ["python", "-m"]:
            assert importlib.util.find_spec(command[2]) is not None, command
            ours += 1
        elif command[0] == "agentctl":
            assert command[1] in verbs, command
            ours += 1
    assert ours >= 6


def image_commands() -> list[list[str]]:
    """Every command compose and Kubernetes run from our image: each service's or
    container's own (the image's CMD where it gives none), and their health checks."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    cmd = re.search(r"^CMD (\[.*\])$", dockerfile, re.MULTILINE)
    assert cmd is not None
    default = json.loads(cmd.group(1))
    found = []
    for service in compose()["services"].values():
        if service.get("image") == OUR_IMAGE:
            found.append(service.get("command", default))
            check = service.get("healthcheck", {}).get("test")
            if check:
                found.append(check[1:] if check[0] == "CMD" else ["sh", "-c", check[1]])
    for container in containers():
        if container["image"] == OUR_IMAGE:
            found.append(container.get("command", default) + container.get("args", []))
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                if "exec" in container.get(probe, {}):
                    found.append(container[probe]["exec"]["command"])
    return found


def modules_run(command: list[str]) -> list[str]:
    """The Python modules a command runs: `python -m NAME`, and agentctl's entry point
    (pyproject's script), also where a shell script calls them."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    text = " ".join(command)
    if command[0] not in ("python", "agentctl", "sh"):
        raise AssertionError(f"a command of our image this test cannot read: {command}")
    named = re.findall(r"\bpython -m ([\w.]+)", text)
    named += [scripts["agentctl"].split(":")[0]] if re.search(r"\bagentctl\b", text) else []
    return [f"{name}.__main__" if source_of(f"{name}.__main__") else name for name in named]


def source_of(module: str) -> Path | None:
    """Where a name of ours lives in the repository (durable_agents/ links the top-level
    folders in); None for a name that is no module of ours (a class, a function)."""
    base = ROOT.joinpath(*module.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


OUR_MODULE = r"durable_agents(\.\w+)+"


def imports_of(path: Path) -> Iterator[str]:
    """The names a module imports, at its top or inside a function (a part imports what its
    extra brings only when it starts), asks runtime/extras.py's `require` for, or names in
    a lazy-import table ("durable_agents.…" strings)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "require":
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield first.value
        elif isinstance(node, ast.Constant) and re.fullmatch(OUR_MODULE, str(node.value)):
            yield str(node.value)


def extra_modules_needed(entry: str) -> set[str]:
    """What the extras bring (runtime/extras.py) that a module may import, through every
    module of ours it imports in turn."""
    brought = {module.split(".")[0] for modules in EXTRAS.values() for module in modules}
    seen: set[str] = set()
    needed: set[str] = set()
    waiting = [entry]
    while waiting:
        name = waiting.pop()
        if name in seen:
            continue
        seen.add(name)
        if name.split(".")[0] != "durable_agents":
            needed.add(name.split(".")[0])
        elif (path := source_of(name)) is not None:
            waiting += imports_of(path)
    return needed & brought


def extras_installed() -> set[str]:
    """The extras the Dockerfile's pip install asks for, and those they bring in turn."""
    asked = re.findall(r"pip install .*?\.\[([\w,-]+)\]", (ROOT / "Dockerfile").read_text())
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found: set[str] = set()
    waiting = [extra for group in asked for extra in group.split(",")]
    while waiting:
        extra = waiting.pop()
        if extra not in found:
            found.add(extra)
            for line in declared["optional-dependencies"][extra]:
                requirement = Requirement(line)
                waiting += requirement.extras if requirement.name == DISTRIBUTION else []
    return found


def test_the_image_installs_the_extras_of_every_command_it_runs():
    installed = {module for extra in extras_installed() for module in EXTRAS[extra]}
    run = sorted({module for command in image_commands() for module in modules_run(command)})
    missing = {module: extra_modules_needed(module) - installed for module in run}
    assert {module: gone for module, gone in missing.items() if gone} == {}
    # The worker, the codec server, the console and agentctl: each was read.
    assert len(run) == 4, run


def test_the_image_holds_every_package():
    copied = set(re.findall(r"^COPY (\w+) ", (ROOT / "Dockerfile").read_text(), re.MULTILINE))
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages - copied == {"bench", "tests"}


def test_compose_publishes_temporal_on_this_machine_only():
    [published] = compose()["services"]["temporal"]["ports"]
    assert interpolate_default(published) == "127.0.0.1:7233:7233"
    for name, service in compose()["services"].items():
        for port in service.get("ports", []):
            assert interpolate_default(str(port)).startswith("127.0.0.1:"), (name, port)


def interpolate_default(value: str) -> str:
    """${NAME:-default} as compose reads it with NAME unset."""
    return re.sub(r"\$\{\w+:-([^}]*)\}", lambda m: m.group(1), value)


def _sealed(keys: str, text: str) -> dict[str, Any]:
    from google.protobuf import json_format
    from temporalio.api.common.v1 import Payload

    from durable_agents.runtime.encryption import EncryptionCodec, Keyring

    plain = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(text).encode())
    [sealed] = asyncio.run(EncryptionCodec(Keyring.parse(keys)).encode([plain]))
    return json_format.MessageToDict(sealed)


def _codec_from(env: dict[str, str], monkeypatch) -> Any:
    from fastapi.testclient import TestClient

    from durable_agents.worker.codec_server import app_from

    return TestClient(app_from(validate(env, monkeypatch)))


def _decodes_as_the_web_ui_does(codec: Any, endpoint_path: str) -> None:
    """The Web UI POSTs {"payloads": [...]} to <endpoint>/decode; it gets plaintext back.
    Its path makes nothing: /encode there is refused."""
    sealed = _sealed(SAMPLES["AGENT_ENCRYPTION_KEYS"], "goal: pay INV-1001")
    decoded = codec.post(f"{endpoint_path}/decode", json={"payloads": [sealed]})
    assert decoded.status_code == 200, decoded.text
    [payload] = decoded.json()["payloads"]
    assert base64.b64decode(payload["data"]) == b'"goal: pay INV-1001"'
    made = codec.post(f"{endpoint_path}/encode", json={"payloads": []})
    assert made.status_code == 403


def test_the_web_ui_decodes_through_the_codec_server_as_compose_configures_them(monkeypatch):
    services = compose()["services"]
    env = {k: interpolate(str(v)) for k, v in services["codec"]["environment"].items()}
    endpoint = interpolate(services["ui"]["environment"]["TEMPORAL_CODEC_ENDPOINT"])
    path = "/" + endpoint.split("/", 3)[3]
    _decodes_as_the_web_ui_does(_codec_from(env, monkeypatch), path)


def test_the_web_ui_decodes_through_the_codec_server_as_kubernetes_configures_it(monkeypatch):
    [codec] = [c for c in containers() if c["name"] == "codec"]
    env = {e["name"]: e.get("value") or SAMPLES[e["name"]] for e in codec["env"]}
    # The endpoint the manifest tells operators to give the Web UI.
    text = (ROOT / "infra/k8s/codec-server.yaml").read_text()
    assert "/ui/<AGENT_CODEC_UI_TOKEN>" in text
    _decodes_as_the_web_ui_does(
        _codec_from(env, monkeypatch), f"/ui/{SAMPLES['AGENT_CODEC_UI_TOKEN']}"
    )


def test_the_oauth2_proxy_sidecar_gets_its_own_secrets_and_a_required_email_domain():
    [proxy] = [c for c in containers() if c["name"] == "oauth2-proxy"]
    assert "envFrom" not in proxy  # not the console's secrets
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in proxy["env"]}
    assert {r["name"] for r in refs.values()} == {"durable-agents-oauth2-proxy"}
    domains = refs["OAUTH2_PROXY_EMAIL_DOMAINS"]
    assert domains.get("optional", False) is False  # the pod does not start without it
    assert not [a for a in proxy["args"] if a.startswith("--email-domain")]
