"""The what-if worker: the agent workflow on a what-if task queue of its own, run inside the
process that asked for the what-if, with activities that never act (activities/shadow.py).
It serves the variant's agents; it lives as long as the what-if does."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from activities.crash_points import CrashPoints
from activities.mcp import MCPActivities
from activities.memory import embedder
from activities.model import ClientFactory, ModelActivities, openai_clients
from activities.runs import await_run, fork_origin
from activities.shadow import Recordings, ShadowModelActivities, ShadowToolActivities
from activities.stores import Stores
from activities.tools import ToolActivities
from activities.transcript import TranscriptActivities
from runtime.settings import Settings
from worker.main import sandbox_restrictions
from workflows.agent import AgentWorkflow
from workflows.registry import AgentRegistry, serve


def build_shadow_worker(
    client: Client,
    settings: Settings,
    registry: AgentRegistry,
    recordings: Recordings,
    task_queue: str,
    *,
    model_clients: ClientFactory = openai_clients,
) -> Worker:
    """A worker for one what-if: unversioned (no deployment of ours gains a build), its
    model answering from the recorded runs' memo where it can, its tools from the record."""
    serve(task_queue, registry)
    stores = Stores.open(settings)
    model = ModelActivities(settings, stores, registry, model_clients)
    embed = embedder(settings.model_base_url, settings.model_api_key, settings.embedding_model)
    caps = (settings.memory_recall_limit, settings.memory_recall_bytes)
    tools = ToolActivities(
        stores, CrashPoints(None, settings.data_dir), registry, settings.data_dir, embed, caps
    )
    mcp = MCPActivities(settings, stores, registry)
    shadow_tools = ShadowToolActivities(tools, mcp, recordings)
    shadow_model = ShadowModelActivities(model, set(recordings.calls))
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentWorkflow],
        activities=[
            shadow_model.call_model,
            shadow_tools.run_tool,
            shadow_tools.call_mcp_tool,
            shadow_tools.evaluate_call,
            shadow_tools.resolve_agent,
            mcp.list_mcp_tools,
            await_run,
            fork_origin,
            TranscriptActivities(stores.transcript).copy_transcript,
        ],
        workflow_runner=SandboxedWorkflowRunner(restrictions=sandbox_restrictions(settings)),
        # Its activities never act: cancelling them at the end loses nothing.
        graceful_shutdown_timeout=timedelta(seconds=1),
    )
