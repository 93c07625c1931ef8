"""Namespace set-up before runs: our search attributes (the dev server registers them
itself from start-dev flags), the retention of closed runs, and the daily prune Schedule.
`agentctl up` does it for the local stack, `agentctl setup` for a real cluster."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import timedelta

from google.protobuf.duration_pb2 import Duration
from temporalio.api.namespace.v1 import NamespaceConfig
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import (
    DescribeNamespaceRequest,
    RegisterNamespaceRequest,
    UpdateNamespaceRequest,
)
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleSpec,
    ScheduleUpdate,
)
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.runtime.settings import Settings
from durable_agents.worker.search_attributes import (
    SearchAttributesMissing,
    advice,
    missing_search_attributes,
    register_search_attributes,
    require_search_attributes,
)
from durable_agents.workflows.activity_io import PruneRequest

# Where they live (a worker checks them before it polls); here too, for `setup` and tests.
__all__ = [
    "NamespaceSetup",
    "SearchAttributesMissing",
    "ensure_prune_schedule",
    "hours",
    "missing_search_attributes",
    "register_search_attributes",
    "require_search_attributes",
    "set_retention",
    "set_up_namespace",
    "settle_retention",
]


@dataclass(frozen=True)
class NamespaceSetup:
    """What `setup` (or `up`) did to a namespace, and what it left alone, to say so."""

    namespace: str
    address: str
    retention: timedelta  # the namespace's retention after set-up
    retention_set: bool  # True: ours (a namespace we created); False: theirs, left alone


def hours(span: timedelta) -> str:
    """A retention as `temporal` prints it (720h)."""
    return f"{span.total_seconds() / 3600:g}h"


async def _retention_of(client: Client) -> timedelta | None:
    """The namespace's retention; None when the namespace does not exist."""
    try:
        described = await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=client.namespace)
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return described.config.workflow_execution_retention_ttl.ToTimedelta()


async def _until_served(client: Client, within: float = 60.0) -> None:
    """A namespace just registered is served once Temporal's namespace cache has it (some
    seconds): until then its calls say NOT_FOUND."""
    deadline = time.monotonic() + within
    while True:
        try:
            await client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=client.namespace)
            )
            await client.count_workflows()
            return
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.5)


async def set_retention(client: Client, days: float) -> None:
    """How long Temporal keeps a closed run's history in this namespace."""
    await client.workflow_service.update_namespace(
        UpdateNamespaceRequest(
            namespace=client.namespace,
            config=NamespaceConfig(
                workflow_execution_retention_ttl=Duration(seconds=int(days * 86400))
            ),
        )
    )


async def settle_retention(client: Client, days: float, *, ours: bool) -> timedelta:
    """A namespace that is `ours` (the local stack's) gets our retention; a team's keeps its
    own, whatever it is: a guest never rewrites it. One that does not exist yet is created
    with ours. The retention in force is returned."""
    wanted = Duration(seconds=int(days * 86400))
    current = await _retention_of(client)
    if current is None:
        await client.workflow_service.register_namespace(
            RegisterNamespaceRequest(
                namespace=client.namespace, workflow_execution_retention_period=wanted
            )
        )
        return wanted.ToTimedelta()
    if ours:
        await set_retention(client, days)
        return wanted.ToTimedelta()
    return current


async def ensure_prune_schedule(client: Client, settings: Settings) -> None:
    """A daily Schedule that prunes our own data of runs closed longer than the retention."""
    request = PruneRequest(older_than_seconds=settings.retention_days * 86400)
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(
            "PruneWorkflow",
            request,
            id=f"{settings.prune_schedule_id}-run",
            task_queue=settings.task_queue,
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(days=1))]),
    )
    try:
        await client.create_schedule(settings.prune_schedule_id, schedule)
    except ScheduleAlreadyRunningError:  # `up` and `setup` run many times: the age follows
        # AGENT_RETENTION_DAYS (a prune younger than the worker's retention deletes nothing)
        handle = client.get_schedule_handle(settings.prune_schedule_id)
        await handle.update(lambda _: ScheduleUpdate(schedule=schedule))


async def set_up_namespace(client: Client, settings: Settings, *, ours: bool) -> NamespaceSetup:
    """Everything a namespace needs before runs: search attributes, pruning, and (in a
    namespace that is `ours`, or one this creates) the retention of closed runs. A name of
    ours taken with another type refuses it before anything is changed."""
    before = await _retention_of(client)
    if before is not None:
        await refuse_taken_names(client)
    retention = await settle_retention(client, settings.retention_days, ours=ours)
    if before is None:
        await _until_served(client)
    await register_search_attributes(client)
    missing = await missing_search_attributes(client)  # taken meanwhile, with another type
    if missing:
        raise SearchAttributesMissing(advice(client.namespace, missing))
    await ensure_prune_schedule(client, settings)
    return NamespaceSetup(
        namespace=client.namespace,
        address=client.service_client.config.target_host,
        retention=retention,
        retention_set=ours or before is None,
    )


async def refuse_taken_names(client: Client) -> None:
    """Refuse a namespace where any of our search attributes' names is taken with another
    type, all of them checked against all the namespace has before one is registered: a
    refusal leaves the namespace as it was, not with some of ours added (their types
    cannot be changed, and the fix is to remove the taken names, then set up again)."""
    taken = [name for name in await missing_search_attributes(client) if " (" in name]
    if taken:
        raise SearchAttributesMissing(advice(client.namespace, taken))
