"""The what-if worker: the agent workflow on a what-if task queue of its own, run inside the
process that asked for the what-if, with activities that never act (activities/shadow.py).
It serves the variant's agents; it lives as long as the what-if does."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from durable_agents.activities.model import ClientFactory, openai_clients
from durable_agents.activities.shadow import Recordings
from durable_agents.runtime.settings import Settings
from durable_agents.worker.activities import shadow_activities
from durable_agents.worker.plugin import DurableAgentsPlugin, without_our_plugin
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.registry import AgentRegistry


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
    plugin = DurableAgentsPlugin(
        registry,
        settings=settings,
        workflows=[AgentWorkflow],
        activities=lambda _client, settings, registry: shadow_activities(
            settings, registry, recordings, model_clients=model_clients
        ),
        admits=recordings.admits,
    )
    return Worker(
        without_our_plugin(client),
        task_queue=task_queue,
        plugins=[plugin],
        # Its activities never act: cancelling them at the end loses nothing.
        graceful_shutdown_timeout=timedelta(seconds=1),
    )
