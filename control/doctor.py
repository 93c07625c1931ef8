"""agentctl doctor: check each part the agents need and say in plain words what to fix."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, TaskQueueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import (
    GetWorkflowExecutionHistoryReverseRequest,
)
from temporalio.client import Client

from durable_agents.activities.model_setup import MODEL_SETTINGS, OFFLINE_MODEL_ALONE
from durable_agents.activities.stores import open_database
from durable_agents.control import release
from durable_agents.control.runs import WORKFLOW_TYPE
from durable_agents.infra.processes import port_in_use
from durable_agents.infra.stack import files_for, polling_builds, recent_pollers
from durable_agents.runtime.client import connect, connect_failure
from durable_agents.runtime.connection import Connection, ConnectionSettingsError, connection
from durable_agents.runtime.encryption import KeyringError, keyring_from
from durable_agents.runtime.extras import ExtraMissing, install_hint
from durable_agents.runtime.settings import Settings
from durable_agents.workflows import search_attributes as sa
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.registry import load_registry
from durable_agents.workflows.signed_payments import money_tools, trusted_keys_from

TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class Finding:
    part: str
    ok: bool
    says: str
    fix: str = ""


async def diagnose(settings: Settings, only: set[str] | None = None) -> list[Finding]:
    """Each part's finding, in order; `only` limits the parts (a readiness probe's)."""
    checks: list[tuple[str, Callable[[Settings], Awaitable[Finding | list[Finding]]]]] = [
        ("transport", _transport),
        ("temporal", _temporal),
        ("worker", _worker),
        ("model", _model),
        ("stores", _stores),
        ("encryption", _encryption),
        ("runs", _runs),
        ("protections", _protections),
    ]
    unknown = (only or set()) - {part for part, _ in checks}
    if unknown:
        raise ValueError(
            f"no part named {', '.join(sorted(unknown))}; parts: "
            + ", ".join(part for part, _ in checks)
        )
    findings = []
    for part, check in checks:
        if only and part not in only:
            continue
        try:
            found = await asyncio.wait_for(check(settings), TIMEOUT_SECONDS * 2)
            findings += found if isinstance(found, list) else [found]
        except TimeoutError:
            findings.append(Finding(part, False, "no answer in time", "is it running?"))
    return findings


def _target(part: str, settings: Settings) -> Connection | Finding:
    """Where this process reaches Temporal, or the finding that its settings cannot be used."""
    try:
        return connection(settings)
    except ConnectionSettingsError as err:
        return Finding(part, False, str(err), "fix the TLS, API key or gRPC metadata settings")


async def _transport(settings: Settings) -> Finding:
    """How this process reaches Temporal; plaintext beyond this machine is flagged."""
    target = _target("transport", settings)
    if isinstance(target, Finding):
        return target
    says = f"{target.transport} to {target.address}, namespace {target.namespace!r}"
    if target.plaintext_to_remote:
        return Finding(
            "transport",
            False,
            f"{says}: plaintext to a remote address, anyone on the way reads and can act",
            "set TEMPORAL_TLS=true (or AGENT_TEMPORAL_TLS_CA_FILE, _CERT_FILE, _KEY_FILE) or "
            'TEMPORAL_API_KEY; docs/operations.md, "Connecting to Temporal"',
        )
    return Finding("transport", True, says)


async def _temporal(settings: Settings) -> Finding:
    target = _target("temporal", settings)
    if isinstance(target, Finding):
        return target
    where = f"{target.address}, namespace {target.namespace!r}"
    try:
        client = await connect(settings)
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
    except Exception as err:
        return Finding(
            "temporal",
            False,
            f"cannot reach Temporal at {where}: {connect_failure(str(err))}",
            "start the local stack with `agentctl up`, or point TEMPORAL_ADDRESS and "
            "TEMPORAL_NAMESPACE (or a TEMPORAL_PROFILE) at your cluster",
        )
    missing = [key.name for key in sa.ALL if key.name not in listed.custom_attributes]
    if missing:
        return Finding(
            "temporal",
            False,
            f"reachable at {where}, but search attributes {', '.join(missing)} are missing",
            "run `agentctl setup` once against this namespace",
        )
    return Finding("temporal", True, f"reachable at {where}; search attributes registered")


async def _worker(settings: Settings) -> Finding:
    try:
        polling = await polling_builds(settings)
    except Exception as err:
        return Finding("worker", False, f"cannot ask Temporal: {str(err)[:120]}", "fix temporal")
    if not polling:
        return Finding(
            "worker",
            False,
            f"no worker polls task queue {settings.task_queue!r}: runs would wait",
            "start one with `agentctl worker` (or `agentctl up` for the local stack)",
        )
    if settings.worker_versioning:
        return await _builds(settings, polling)
    return Finding("worker", True, f"a worker polls task queue {settings.task_queue!r}")


async def _builds(settings: Settings, polling: set[str]) -> Finding:
    """Versioned: the current build, and every build holding open runs, has workers."""
    status = await release.status(await connect(settings), settings)
    polled = ", ".join(sorted(b or "unversioned" for b in polling))
    problems, fixes = [], []
    if status.current is not None and status.current not in polling:
        problems.append(f"new runs start on build {status.current}, which no worker polls")
        fixes.append(
            f"start workers of {status.current}, or release one that runs (`agentctl release "
            "check`, `agentctl release promote BUILD`)"
        )
    for build in status.builds:
        if build.open_runs and build.build not in polling:
            problems.append(
                f"{build.open_runs} open runs are pinned to build {build.build}, "
                "which no worker polls"
            )
            fixes.append(
                f"start workers of {build.build}, or `agentctl release move RUN --to "
                "BUILD` where their histories replay"
            )
    if problems:
        return Finding(
            "worker",
            False,
            f"{'; '.join(problems)} (workers poll: {polled})",
            "; ".join(dict.fromkeys(fixes)),
        )
    return Finding(
        "worker",
        True,
        f"workers of build {polled} poll task queue {settings.task_queue!r}; new runs start on "
        f"{status.current}",
    )


async def _model(settings: Settings) -> Finding:
    """Reachability only: the API key is read by the worker alone, never here."""
    url = settings.model_base_url.rstrip("/") + "/models"
    try:
        await asyncio.to_thread(_http_status, url)
    except urllib.error.HTTPError as err:
        if err.code in (401, 403):
            return Finding(
                "model", True, f"{url} answers (HTTP {err.code} without a key; the worker has it)"
            )
        return Finding("model", False, f"{url} answered HTTP {err.code}", "check OPENAI_BASE_URL")
    except OSError as err:
        return Finding("model", False, f"cannot reach {url}: {err}", _model_fix(settings))
    return Finding("model", True, f"{url} answers ({settings.effective_model_name})")


def _model_fix(settings: Settings) -> str:
    """What to do about an unreachable model: a configured endpoint is checked; with none,
    a team on its own Temporal is told the settings (a second stack is not what it needs),
    anyone else `agentctl up` first."""
    if not settings.uses_offline_model:
        return "check OPENAI_BASE_URL and the network"
    alone = OFFLINE_MODEL_ALONE.format(port=settings.offline_model_port)
    if own_temporal(settings):
        return f"no model configured: {MODEL_SETTINGS}, or run the offline model alone: `{alone}`"
    return f"start the offline model with `agentctl up`, or {MODEL_SETTINGS}"


def own_temporal(settings: Settings) -> bool:
    """Whether the Temporal this process uses is the team's own, not our local stack's:
    its address is set elsewhere (TEMPORAL_ADDRESS, a profile), or one answers on ours
    that `agentctl up` did not start from this data dir."""
    try:
        address = connection(settings).address
    except ConnectionSettingsError:
        return False  # the transport finding says what to fix
    if address != settings.temporal_address:
        return True
    ours = files_for(settings, "temporal").running_pid() is not None
    return not ours and port_in_use(settings.temporal_port, settings.temporal_host)


def _http_status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:
        return int(response.status)


async def _stores(settings: Settings) -> Finding:
    try:
        db = await asyncio.to_thread(open_database, settings)
        await asyncio.to_thread(db.query, "SELECT 1 AS ok")
    except ExtraMissing as err:  # the driver is not installed: no server or URL to check
        return Finding("stores", False, f"cannot open our stores: {err}", install_hint("postgres"))
    except Exception as err:
        fix = (
            "check AGENT_DATABASE_URL (is PostgreSQL running and the database there?)"
            if settings.database_url
            else f"check that {settings.data_dir} is writable (AGENT_DATA_DIR)"
        )
        return Finding("stores", False, f"cannot open our stores: {str(err)[:160]}", fix)
    if not db.local:
        return Finding("stores", True, f"open at {db.where}: one store every replica can share")
    try:
        pollers = await activity_pollers(settings)
    except Exception:
        pollers = []  # the temporal finding says why Temporal does not answer
    return replicas_finding(db.where, pollers)


# What replicas need (README "In your own project"; docs/architecture.md, "Replicas and the
# stores"): a SQLite file is one machine's; a run served by one replica waits on the others.
SHARED_STORE_FIX = (
    "replicas must share one store: set AGENT_DATABASE_URL=postgresql://... (the [postgres] "
    "extra) on every replica; a run never proceeds on a worker whose store lacks its "
    "records, it waits (StoreMissingRecords)"
)


def replicas_finding(where: str, pollers: list[str]) -> Finding:
    """The stores' finding for a local SQLite file, from the identities of the workers
    polling the task queue ("pid@host", the SDK's default): workers on more than one
    machine cannot share it; several on this one share it only through one AGENT_DATA_DIR."""
    hosts = sorted({identity.partition("@")[2] or identity for identity in pollers})
    if len(hosts) > 1:
        return Finding(
            "stores",
            False,
            f"open at {where}, a SQLite file local to one machine, but {len(pollers)} workers "
            f"on {len(hosts)} machines ({', '.join(hosts)}) poll the task queue: each keeps "
            "the records of the runs it served, and those runs wait on the others",
            SHARED_STORE_FIX,
        )
    if len(pollers) > 1:
        return Finding(
            "stores",
            True,
            f"open at {where}, a SQLite file; {len(pollers)} workers poll from this machine: "
            "they share it only if they share AGENT_DATA_DIR (else runs wait on each other)",
            SHARED_STORE_FIX,
        )
    return Finding(
        "stores",
        True,
        f"open at {where}, a SQLite file: one machine's (for more than one replica, set "
        "AGENT_DATABASE_URL to a PostgreSQL every replica shares)",
    )


async def activity_pollers(settings: Settings) -> list[str]:
    """The identities of the workers that polled the task queue's activities lately."""
    pollers = await recent_pollers(settings, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY)
    return sorted({poller.identity for poller in pollers})


async def _encryption(settings: Settings) -> Finding:
    try:
        keyring = keyring_from(settings)
    except KeyringError as err:
        return Finding(
            "encryption",
            False,
            str(err),
            "fix AGENT_ENCRYPTION_KEYS / AGENT_ENCRYPTION_KEYS_FILE (`agentctl keys new`)",
        )
    if keyring is None:
        return Finding("encryption", True, "off: payloads and stores are not encrypted")
    try:
        await asyncio.to_thread(_http_status, f"{settings.codec_url}/health")
    except OSError as err:
        return Finding(
            "encryption",
            False,
            f"on (key {keyring.active!r}), but the codec server at {settings.codec_url} "
            f"does not answer ({err}): the Web UI cannot show payloads",
            "`agentctl up` starts it locally; elsewhere run "
            "`python -m durable_agents.worker.codec_server`",
        )
    return Finding("encryption", True, f"on (active key {keyring.active!r}); codec server answers")


async def _protections(settings: Settings) -> list[Finding]:
    """What a production deployment turns on (docs/operations.md, "Production deployment"),
    each one that is off named in a line of its own. Off is a warning, not a failure (a
    local stack runs without them); settings that turn one on but cannot work fail. A
    plaintext transport, and bearer metadata or an API key without TLS, are the transport's
    findings already; the console always asks who is signing in."""
    found = [
        *_keys_off(settings),
        *_sealing_off(settings),
        *await asyncio.to_thread(_signing_off, settings),
    ]
    return found or [
        Finding(
            "protections",
            True,
            "on: the deployment's keys, sealed inputs, and signed decisions for agents that "
            "move money",
        )
    ]


KEYS_FIX = (
    "`agentctl keys new k1 --file keys` once, and AGENT_ENCRYPTION_KEYS_FILE=keys for every "
    "part (agentctl up makes them in its data dir)"
)


def _keys_off(settings: Settings) -> list[Finding]:
    """No keys: a worker cannot tell the deployment's hand-offs from a poller's (docs/
    architecture.md, "Keys, not queues"). Told the namespace is ours alone, a warning;
    otherwise the worker refuses to serve, and so this fails."""
    if settings.encryption_on:
        return []
    if settings.namespace_is_ours_alone:
        return [
            Finding(
                "protections",
                True,
                "keys off (AGENT_NAMESPACE_IS_OURS_ALONE): whoever can poll this namespace's "
                "task queues is taken for the deployment",
                KEYS_FIX,
            )
        ]
    return [
        Finding(
            "protections",
            False,
            "no keys: a worker with our plugin refuses to serve (it cannot tell the "
            "deployment's hand-offs from those of anyone who polls its queue)",
            KEYS_FIX,
        )
    ]


def _sealing_off(settings: Settings) -> list[Finding]:
    if settings.require_sealed_inputs:
        return []
    plain = "" if settings.encryption_on else " (and payloads are not encrypted)"
    return [
        Finding(
            "protections",
            True,
            f"sealed inputs off{plain}: a start, signal or update made without the payload "
            "key is accepted",
            "AGENT_REQUIRE_SEALED_INPUTS=true, with AGENT_ENCRYPTION_KEYS_FILE (`agentctl keys "
            'new k1`); docs/operations.md, "The trust model"',
        )
    ]


SIGNING_FIX = (
    "AGENT_REQUIRE_SIGNED_PAYMENTS=true with AGENT_TRUSTED_KEYS_FILE (`agentctl signing "
    "console > trusted-keys.json`), or require_signed_decisions in the agent's policy"
)


def _signing_off(settings: Settings) -> list[Finding]:
    """Each served agent whose tools move money and whose decisions need no signature."""
    if settings.require_signed_payments and settings.trusted_keys_file is not None:
        try:
            trusted_keys_from(settings.trusted_keys_file.read_text())
        except (OSError, ValueError) as err:
            why = err.strerror if isinstance(err, OSError) else err
            return [
                Finding(
                    "protections",
                    False,
                    f"signed decisions for money are on, but AGENT_TRUSTED_KEYS_FILE "
                    f"{settings.trusted_keys_file}: {why} (the worker will not start)",
                    SIGNING_FIX,
                )
            ]
        return []
    try:
        registry = load_registry(settings.agent_modules, settings.modules_path)
    except Exception as err:  # the worker's own finding says more: it will not start either
        return [
            Finding(
                "protections",
                True,
                f"cannot tell which agents move money: {' '.join(str(err).split())[:160]}",
                "check AGENT_MODULES",
            )
        ]
    return [
        Finding(
            "protections",
            True,
            f"signed decisions off for agent {name}, whose tools move money "
            f"({', '.join(tools)}): anyone who may signal the run decides, in any name",
            SIGNING_FIX,
        )
        for name, agent in sorted(registry.agents.items())
        if (tools := money_tools(agent))
        and not (agent.policy is not None and agent.policy.require_signed_decisions)
    ]


# How many open runs of the task queue `doctor` looks at; a namespace with more is sampled.
RUNS_EXAMINED = 500
DESCRIBES_AT_ONCE = 20


async def _runs(settings: Settings) -> Finding:
    """Open runs whose workflow task keeps failing (nondeterminism, a payload the code cannot
    read): Temporal retries them for ever and nothing else says so."""
    try:
        client = await connect(settings)
        sick = await wedged_runs(client, settings.task_queue)
    except Exception as err:
        return Finding(
            "runs", False, f"cannot list runs: {connect_failure(str(err))}", "fix temporal"
        )
    if not sick:
        return Finding("runs", True, f"no open run of {settings.task_queue!r} is wedged")
    listed = "; ".join(f"{run} (attempt {attempt}): {message}" for run, attempt, message in sick)
    return Finding(
        "runs",
        False,
        f"{len(sick)} run(s) whose workflow task keeps failing: {listed}",
        "rewind each to its last good step (`agentctl history RUN`, then `agentctl rewind RUN "
        "--to-step K`), reset it (`temporal workflow reset`), or terminate it "
        "(`temporal workflow terminate`); a nondeterminism error means the code changed "
        "under the run: deploy the old code or patch the change (docs/changing-workflows.md)",
    )


async def wedged_runs(client: Client, task_queue: str) -> list[tuple[str, int, str]]:
    """(run id, attempt, last failure) of each open agent run whose workflow task has failed
    at least twice in a row."""
    query = (
        f"WorkflowType = '{WORKFLOW_TYPE}' AND ExecutionStatus = 'Running' "
        f"AND TaskQueue = '{task_queue}'"
    )
    executions = [e async for e in client.list_workflows(query, limit=RUNS_EXAMINED)]
    gate = asyncio.Semaphore(DESCRIBES_AT_ONCE)

    async def attempt(workflow_id: str) -> int:
        async with gate:
            description = await client.get_workflow_handle(workflow_id).describe()
        return int(description.raw_description.pending_workflow_task.attempt)

    attempts = await asyncio.gather(*(attempt(e.id) for e in executions))
    return [
        (e.id, tries, await _last_task_failure(client, e.id, e.run_id))
        for e, tries in zip(executions, attempts, strict=True)
        if tries >= 2
    ]


async def _last_task_failure(client: Client, workflow_id: str, run_id: str) -> str:
    response = await client.workflow_service.get_workflow_execution_history_reverse(
        GetWorkflowExecutionHistoryReverseRequest(
            namespace=client.namespace,
            execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
            maximum_page_size=100,
        )
    )
    for event in response.history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            failure = event.workflow_task_failed_event_attributes.failure
            try:  # an encrypted stack keeps the message in the failure's encoded attributes
                message = str(await client.data_converter.decode_failure(failure))
            except Exception:
                message = failure.message
            return preview(message or "(no message)", 200)
    return "(the failure is not in its last 100 events)"
