"""Revoking a signing key: the open runs hear it at once (the `revoke_keys` signal, which
only takes trust away), and runs started later refuse it from AGENT_REVOKED_KEYS."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.service import RPCError

from durable_agents.control.runs import RunError
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.people_inputs import KeyRevocation


def open_runs_query(task_queue: str) -> str:
    return (
        "WorkflowType = 'AgentWorkflow' AND ExecutionStatus = 'Running' "
        f"AND TaskQueue = '{task_queue}'"
    )


async def revoke(client: Client, settings: Settings, revoked: KeyRevocation) -> list[str]:
    """Tell every open agent run of this deployment's task queue; returns their ids."""
    told: list[str] = []
    try:
        async for run in client.list_workflows(open_runs_query(settings.task_queue)):
            try:
                await client.get_workflow_handle(run.id).signal("revoke_keys", revoked)
            except RPCError:
                continue  # closed meanwhile: it counts no signature any more
            told.append(run.id)
    except RPCError as err:
        raise RunError(f"cannot list the open runs: {err.message}") from None
    return told
