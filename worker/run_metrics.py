"""Runs by status and approvals waiting, counted in Temporal's visibility store and set as
gauges on the worker's Prometheus endpoint. Every worker reports the same cluster-wide
counts: take the max, not the sum, across workers."""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client
from temporalio.service import RPCError

from durable_agents.runtime.telemetry import RunGauges
from durable_agents.workflows.records import RunStatus

log = logging.getLogger("durable_agents.metrics")


async def count_runs(client: Client) -> tuple[dict[str, int], int]:
    """(runs by agent status, runs waiting for an approval). Open statuses count only
    running executions: a terminated run keeps the last status it published."""

    async def count(status: RunStatus) -> int:
        query = f'WorkflowType="AgentWorkflow" AND AgentStatus="{status.value}"'
        if not status.is_closed:
            query += ' AND ExecutionStatus="Running"'
        return (await client.count_workflows(query)).count

    counts = await asyncio.gather(*(count(status) for status in RunStatus))
    by_status = {status.value: n for status, n in zip(RunStatus, counts, strict=True)}
    return by_status, by_status[RunStatus.AWAITING_APPROVAL.value]


async def refresh(client: Client, gauges: RunGauges) -> None:
    by_status, approvals = await count_runs(client)
    gauges.set(by_status, approvals)


async def refresh_forever(client: Client, gauges: RunGauges, interval: float) -> None:
    while True:
        try:
            await refresh(client, gauges)
        except RPCError as err:  # a server blip must not stop the worker
            log.warning("could not count runs for metrics: %s", err)
        await asyncio.sleep(interval)
