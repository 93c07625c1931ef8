"""Worker Versioning: the worker is one build of a Temporal worker deployment.

Agent runs are pinned to the build that started them, so a worker of a new build never
replays an old run's history (a change that alters the workflow's commands cannot wedge
them); `agentctl release` decides when a new build takes new runs (control/release.py).
"""

from __future__ import annotations

import hashlib
import logging
from functools import cache
from pathlib import Path

import temporalio
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from durable_agents.runtime.settings import Settings

log = logging.getLogger("durable_agents.versioning")

WORKFLOW_CODE = Path(__file__).resolve().parent.parent / "workflows"


class VersioningUnavailable(RuntimeError):
    """The server, or its namespace, has Worker Versioning turned off."""


@cache
def code_build_id() -> str:
    """A build id that changes when, and only when, what decides a workflow's commands
    changes: the workflow code (workflows/) and the SDK's version. Activities, tools and
    prompts may change under one build id: runs in flight never replay them."""
    digest = hashlib.sha256(temporalio.__version__.encode())
    for path in sorted(WORKFLOW_CODE.rglob("*.py")):
        digest.update(path.relative_to(WORKFLOW_CODE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return f"wf-{digest.hexdigest()[:12]}"


def build_id(settings: Settings) -> str:
    return settings.build_id or code_build_id()


def version(settings: Settings) -> WorkerDeploymentVersion:
    return WorkerDeploymentVersion(settings.deployment_name, build_id(settings))


def deployment_config(settings: Settings) -> WorkerDeploymentConfig | None:
    if not settings.worker_versioning:
        return None
    # Pinned unless a workflow says otherwise (prune auto-upgrades), variants included.
    return WorkerDeploymentConfig(
        version=version(settings),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


async def current_build(client: Client, deployment: str) -> str | None:
    """The build new runs start on, or None (no deployment yet, or no current build)."""
    try:
        described = await client.workflow_service.describe_worker_deployment(
            DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment)
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise unavailable(err) from err
    current = described.worker_deployment_info.routing_config.current_deployment_version
    return current.build_id or None


async def set_current(client: Client, deployment: str, build: str, *, by: str) -> None:
    """Make `build` the one new runs start on. Temporal refuses a build no worker has
    polled from (RPCError FAILED_PRECONDITION), except for a deployment's first build."""
    await client.workflow_service.set_worker_deployment_current_version(
        SetWorkerDeploymentCurrentVersionRequest(
            namespace=client.namespace,
            deployment_name=deployment,
            build_id=build,
            identity=by,
            allow_no_pollers=await current_build(client, deployment) is None,
        )
    )


# Deployments this process has seen with a current build (what it was): each is asked once.
_known: dict[tuple[str, str, str], str] = {}


async def ensure_current_build(client: Client, settings: Settings) -> str | None:
    """A deployment's first build becomes current by itself (before it polls, so no run is
    left waiting); after that only `agentctl release promote` changes it. Returns the
    current build (None with versioning off)."""
    if not settings.worker_versioning:
        return None
    deployment = settings.deployment_name
    key = (client.service_client.config.target_host, client.namespace, deployment)
    if key in _known:
        return _known[key]
    current = await current_build(client, deployment)
    if current is None:
        mine = build_id(settings)
        try:
            await set_current(client, deployment, mine, by=f"first worker of build {mine}")
        except RPCError as err:
            raise unavailable(err) from err
        log.info("build %s is the first of deployment %s: it is current", mine, deployment)
        current = mine
    _known[key] = current
    return current


def unavailable(err: RPCError) -> Exception:
    """Versioning turned off reads as a clear setting to change; other errors stay."""
    text = str(err).lower()
    if err.status in (RPCStatusCode.UNIMPLEMENTED, RPCStatusCode.PERMISSION_DENIED) or (
        "versioning" in text and "disabled" in text
    ):
        return VersioningUnavailable(
            f"Temporal refused Worker Versioning ({err}): enable worker deployments on the "
            "server (dynamic config system.enableDeploymentVersions and "
            "frontend.workerVersioningWorkflowAPIs), or set AGENT_WORKER_VERSIONING=false"
        )
    return err
