"""The local stack: Temporal dev server (SQLite under the data dir), offline model, worker.

`up` starts what is not running and waits for each part to be ready; `down` stops
them; `status` says what runs where. Runs survive down and up: same SQLite file.

A stack is encrypted unless told otherwise: on its first start `up` makes the keys in the
data dir (<data dir>/keys, as `agentctl keys new` prints one), and every part that reads
payloads or stores gets that file; the CLI finds it there too (Settings.effective_keys_file).
An `up` that fails leaves nothing half-started: it stops the parts it started.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import PollerInfo, TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, GetSystemInfoRequest
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_fixed

from durable_agents.infra.binaries import temporal_cli
from durable_agents.infra.processes import (
    ProcessFiles,
    ProcessSpec,
    StackError,
    port_in_use,
    spawn,
    stop,
)
from durable_agents.infra.temporal_setup import set_up_namespace
from durable_agents.runtime import versioning
from durable_agents.runtime.client import POLLER_SEEN_SECONDS, connect
from durable_agents.runtime.encryption import new_key
from durable_agents.runtime.extras import require_all
from durable_agents.runtime.settings import Settings
from durable_agents.workflows import search_attributes as sa

READY_TIMEOUT_SECONDS = 90.0


class NotReady(Exception):
    pass


@dataclass(frozen=True)
class PartStatus:
    name: str
    running: bool
    pid: int | None
    where: str
    log: str


def settings_env(settings: Settings) -> dict[str, str]:
    """The settings as environment, so child processes see exactly what the CLI saw."""
    return {
        "AGENT_DATA_DIR": str(settings.data_dir.resolve()),
        "AGENT_TEMPORAL_HOST": settings.temporal_host,
        "AGENT_TEMPORAL_PORT": str(settings.temporal_port),
        "AGENT_TEMPORAL_UI_PORT": str(settings.temporal_ui_port),
        "AGENT_NAMESPACE": settings.namespace,
        "AGENT_TASK_QUEUE": settings.task_queue,
        "AGENT_OFFLINE_MODEL_PORT": str(settings.offline_model_port),
        "AGENT_CONSOLE_HOST": settings.console_host,
        "AGENT_CONSOLE_PORT": str(settings.console_port),
        "AGENT_WORKER_VERSIONING": str(settings.worker_versioning).lower(),
        **({"AGENT_DEPLOYMENT": settings.deployment} if settings.deployment else {}),
        **({"AGENT_BUILD_ID": settings.build_id} if settings.build_id else {}),
        **({"AGENT_NAMESPACE_IS_OURS_ALONE": "true"} if settings.namespace_is_ours_alone else {}),
    }


def codec_token(settings: Settings) -> str:
    """The codec server's token: the setting, else one made once and kept in the data dir
    (readable by its owner alone)."""
    if settings.codec_token is not None:
        return settings.codec_token.get_secret_value()
    path = settings.data_dir.resolve() / "codec-token"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(32))
    return path.read_text().strip()


def part_specs(settings: Settings) -> list[ProcessSpec]:
    data = settings.data_dir.resolve()
    env = settings_env(settings)
    keyed = env | keys_env(settings)  # for the parts that read payloads or stores
    codec_flags: list[str] = []
    codec_env = keyed
    if settings.encryption_on:
        token = codec_token(settings)
        codec_env = keyed | {"AGENT_CODEC_TOKEN": token}
        from durable_agents.worker.codec_server import (
            ui_endpoint,  # FastAPI: only when encryption is on
        )

        codec_flags = ["--ui-codec-endpoint", ui_endpoint(settings, token)]
    temporal = ProcessSpec(
        name="temporal",
        argv=[
            str(temporal_cli()),
            "server",
            "start-dev",
            "--db-filename",
            str(data / "temporal.sqlite3"),
            "--ip",
            settings.temporal_host,
            "--port",
            str(settings.temporal_port),
            "--ui-port",
            str(settings.temporal_ui_port),
            "--namespace",
            settings.namespace,
            "--log-level",
            "warn",
            "--ui-disable-news-fetch",
            *codec_flags,
            *sa.dev_server_flags(),
        ],
        port=settings.temporal_port,
        env=env,
    )
    model = ProcessSpec(
        name="model",
        argv=[
            sys.executable,
            "-m",
            "durable_agents.infra.offline_model",
            "--port",
            str(settings.offline_model_port),
        ],
        port=settings.offline_model_port,
        env=env,
    )
    # The worker is the application: every setting of ours, the model key included.
    worker = ProcessSpec(
        name="worker",
        argv=[sys.executable, "-m", "durable_agents.worker"],
        port=None,
        env=keyed,
        inherit=("",),
    )
    # The console: our settings (keys to decode, the stores), never the model key.
    console = ProcessSpec(
        name="console",
        argv=[sys.executable, "-m", "durable_agents.console"],
        port=settings.console_port,
        env=keyed,
        inherit=("AGENT_",),
        withhold=("OPENAI", "AGENT_OPENAI"),
    )
    parts = [temporal, worker, console]
    if settings.uses_offline_model:
        parts.insert(1, model)
    if settings.encryption_on:
        # The codec server: our settings (the keys among them), never the model key.
        codec = ProcessSpec(
            name="codec",
            argv=[sys.executable, "-m", "durable_agents.worker.codec_server"],
            port=settings.codec_port,
            env=codec_env,
            inherit=("AGENT_",),
            withhold=("OPENAI",),
        )
        parts.insert(1, codec)
    return parts


def files_for(settings: Settings, name: str) -> ProcessFiles:
    return ProcessFiles(settings.data_dir.resolve(), name)


async def up(settings: Settings, say: Callable[[str], None] = print) -> None:
    """Start each part not running yet. If one fails (or Ctrl-C), the parts this call
    started are stopped, their pid files gone, before the error goes on: what ran before
    keeps running, nothing is left half-started."""
    require_all("the local stack (agentctl up)", "local")
    make_keys(settings, say)
    started: list[ProcessFiles] = []
    try:
        await _start_parts(settings, say, started)
    except BaseException:
        for files in reversed(started):
            if stop(files):
                say(f"{files.name}: stopped (up did not finish)")
        raise


def make_keys(settings: Settings, say: Callable[[str], None] = print) -> None:
    """The stack's encryption keys, made once in the data dir (readable by its owner alone),
    unless AGENT_ENCRYPTION_KEYS or AGENT_ENCRYPTION_KEYS_FILE says where they are. Not while
    a part runs: it was started without keys, and could not read what the keys seal."""
    if settings.encryption_keys is not None or settings.effective_keys_file is not None:
        return
    if any(files_for(settings, name).running_pid() is not None for name in ALL_PARTS):
        return
    path = settings.data_dir.resolve() / KEYS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another `up` made them a moment ago
    with os.fdopen(fd, "w") as keys:
        keys.write(f"{KEY_ID}={new_key()}\n")  # as `agentctl keys new` prints it
    say(f"keys: made {path} (payloads and stores are encrypted with them; keep a copy)")


KEYS_FILE = "keys"  # what Settings.effective_keys_file finds in the data dir
KEY_ID = "k1"


def keys_env(settings: Settings) -> dict[str, str]:
    """Where a part reads the keys: the file, by its full path (the keys given inline,
    AGENT_ENCRYPTION_KEYS, reach the parts that inherit our settings as they are)."""
    found = settings.effective_keys_file
    if settings.encryption_keys is not None or found is None:
        return {}
    return {"AGENT_ENCRYPTION_KEYS_FILE": str(found.resolve())}


async def _start_parts(
    settings: Settings, say: Callable[[str], None], started: list[ProcessFiles]
) -> None:
    for spec in part_specs(settings):
        files = files_for(settings, spec.name)
        if files.running_pid() is not None:
            say(f"{spec.name}: already running (pid {files.running_pid()})")
        else:
            started.append(files)  # before it is spawned: stopped if it never gets ready
            await start_part(spec, settings, say)
        if spec.name == "codec":
            say(
                f"codec: the Web UI decrypts payloads through {settings.codec_url}; "
                "`temporal` CLI users pass --codec-auth 'Bearer <token>' "
                f"(token in AGENT_CODEC_TOKEN or {settings.data_dir.resolve() / 'codec-token'})"
            )
        if spec.name == "temporal":
            done = await set_up_namespace(await connect(settings), settings, ours=True)
            days = done.retention / timedelta(days=1)
            say(
                f"namespace {done.namespace}: retention {days:g} days, "
                f"daily prune schedule {settings.prune_schedule_id!r}"
            )


async def start_part(
    spec: ProcessSpec, settings: Settings, say: Callable[[str], None] = print
) -> subprocess.Popen[bytes]:
    """Start one part in the background and wait until it is ready."""
    files = files_for(settings, spec.name)
    if spec.port is not None and port_in_use(spec.port, settings.temporal_host):
        raise StackError(
            f"{spec.name}: port {spec.port} is already in use by another process; "
            f"stop it or choose another port ({_port_setting(spec.name)})"
        )
    process = spawn(spec, files)
    say(f"{spec.name}: starting (pid {process.pid}, log {files.log_file})")
    await _wait_ready(spec.name, settings, process, files)
    say(f"{spec.name}: ready")
    return process


def _port_setting(name: str) -> str:
    return {
        "temporal": "AGENT_TEMPORAL_PORT",
        "model": "AGENT_OFFLINE_MODEL_PORT",
        "codec": "AGENT_CODEC_PORT",
        "console": "AGENT_CONSOLE_PORT",
    }.get(name, "")


async def _wait_ready(
    name: str,
    settings: Settings,
    process: subprocess.Popen[bytes],
    files: ProcessFiles,
) -> None:
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_delay(READY_TIMEOUT_SECONDS),
            wait=wait_fixed(0.25),
            retry=retry_if_exception_type(NotReady),
            reraise=True,
        ):
            with attempt:
                code = process.poll()
                if code is not None:
                    files.pid_file.unlink(missing_ok=True)
                    raise StackError(
                        f"{name} exited with code {code} while starting; last lines of "
                        f"{files.log_file}:\n{files.tail()}"
                    )
                await _check(name, settings)
    except NotReady as err:
        raise StackError(
            f"{name} not ready after {READY_TIMEOUT_SECONDS:.0f}s ({err}); last lines of "
            f"{files.log_file}:\n{files.tail()}"
        ) from err


async def _check(name: str, settings: Settings) -> None:
    if name == "temporal":
        try:
            client = await connect(settings)
            await client.workflow_service.get_system_info(GetSystemInfoRequest())
        except Exception as err:
            raise NotReady(f"temporal not answering: {err}") from err
    elif name == "model":
        _http_get_json(f"http://127.0.0.1:{settings.offline_model_port}/v1/models")
    elif name == "codec":
        _http_get_json(f"{settings.codec_url}/health")
    elif name == "console":
        _http_get_json(f"{settings.console_url}/health")
    elif name.startswith("worker") and not await worker_polling(settings):
        raise NotReady("no worker polling the task queue yet")


def _http_get_json(url: str) -> object:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return json.loads(response.read())
    except OSError as err:
        raise NotReady(f"{url}: {err}") from err


async def worker_polling(settings: Settings) -> bool:
    """Whether a worker of the code here polls the task queue: after an upgrade the old
    build's stopped worker is still listed for a while, and is not ours."""
    mine = versioning.build_id(settings) if settings.worker_versioning else ""
    return mine in await polling_builds(settings)


async def polling_builds(settings: Settings) -> set[str]:
    """The builds whose workers poll the task queue ("" for an unversioned worker)."""
    pollers = await recent_pollers(settings, TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW)
    return {poller.deployment_options.build_id for poller in pollers}


async def recent_pollers(settings: Settings, kind: TaskQueueType.ValueType) -> list[PollerInfo]:
    """The workers that polled the task queue (for workflow or activity tasks) lately:
    Temporal lists a stopped worker's poller for minutes; an idle live one polls again
    within a minute (its long poll's timeout)."""
    client = await connect(settings)
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=settings.task_queue),
            task_queue_type=kind,
        )
    )
    recent = time.time() - POLLER_SEEN_SECONDS
    return [p for p in response.pollers if p.last_access_time.ToSeconds() >= recent]


# Every part `up` may have started, in the order `down` stops them.
ALL_PARTS = ("console", "worker", "codec", "model", "temporal")


def down(settings: Settings, say: Callable[[str], None] = print) -> None:
    """Stop the parts the settings call for, and any other part still running (a codec
    server started while encryption was on, an offline model before a real one was set)."""
    wanted = {spec.name for spec in part_specs(settings)}
    for name in ALL_PARTS:
        stopped = stop(files_for(settings, name))
        if name in wanted or stopped:
            say(f"{name}: {'stopped' if stopped else 'not running'}")


def status(settings: Settings) -> list[PartStatus]:
    where = {
        "temporal": f"{settings.temporal_address} (Web UI {settings.web_ui_url()})",
        "model": f"{settings.model_base_url} (scripted offline model)",
        "worker": f"task queue {settings.task_queue!r}, model {settings.effective_model_name}",
        "codec": f"{settings.codec_url} (codec server for the Web UI)",
        "console": f"{settings.console_url} (the console: inbox, runs, decisions)",
    }
    parts = []
    for spec in part_specs(settings):
        files = files_for(settings, spec.name)
        pid = files.running_pid()
        parts.append(
            PartStatus(spec.name, pid is not None, pid, where[spec.name], str(files.log_file))
        )
    return parts
