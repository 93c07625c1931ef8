"""Namespace set-up before runs: our search attributes (the dev server registers them
itself from start-dev flags), the retention of closed runs, and the daily prune Schedule.
`agentctl up` does it for the local stack, `agentctl setup` for a real cluster."""

from __future__ import annotations

from datetime import timedelta

from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.namespace.v1 import NamespaceConfig
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.workflowservice.v1 import UpdateNamespaceRequest
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
from durable_agents.workflows import search_attributes as sa
from durable_agents.workflows.activity_io import PruneRequest

_TYPES = {
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
}


async def register_search_attributes(client: Client) -> None:
    wanted = {key.name: _TYPES[key._metadata_type] for key in sa.ALL}
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=wanted)
        )
    except RPCError as err:
        if err.status != RPCStatusCode.ALREADY_EXISTS:
            raise


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


async def set_up_namespace(client: Client, settings: Settings) -> None:
    """Everything a namespace needs before runs: search attributes, retention, pruning."""
    await register_search_attributes(client)
    await set_retention(client, settings.retention_days)
    await ensure_prune_schedule(client, settings)
