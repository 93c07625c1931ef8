"""The worker: the agent workflow and its activities on one task queue.

Stops cleanly on SIGTERM or SIGINT: it stops polling and lets the activities in
flight finish (up to a grace period) instead of leaving them to time out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import Any

from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.worker import Worker

from durable_agents.activities.model import ClientFactory, openai_clients
from durable_agents.activities.sql import StoreSchemaNewer
from durable_agents.activities.store_queue import store_queue
from durable_agents.activities.stores import open_database
from durable_agents.runtime import telemetry, versioning
from durable_agents.runtime.client import TemporalUnreachable, connect
from durable_agents.runtime.connection import ConnectionSettingsError
from durable_agents.runtime.encryption import KeyringError
from durable_agents.runtime.settings import (
    Settings,
    SettingsFileMissing,
    SettingsInvalid,
    load_settings,
)
from durable_agents.worker import run_metrics
from durable_agents.worker.activities import production_activities
from durable_agents.worker.converter import PluginError
from durable_agents.worker.plugin import DurableAgentsPlugin, without_our_plugin
from durable_agents.worker.store_queue import StoreQueueStamp, store_worker
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.prune import PruneWorkflow
from durable_agents.workflows.registry import AgentRegistry, load_registry
from durable_agents.workflows.tools import ToolDefinitionError

log = logging.getLogger("durable_agents.worker")


class AgentWorker(Worker):
    """A worker that, when it starts, makes its build current if its deployment has none
    yet (the first deploy), so new runs have somewhere to go. With a store of its own
    (`store_queue`), it runs the worker of that store's queue beside it
    (worker/store_queue.py): the two start, stop and fail together."""

    def __init__(
        self, client: Client, settings: Settings, store_queue: str | None = None, **options: Any
    ) -> None:
        super().__init__(client, **options)
        self._settings = settings
        self._store_worker = store_worker(self, store_queue) if store_queue else None
        self._beside: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Worker:
        await versioning.ensure_current_build(self.client, self._settings)
        return await super().__aenter__()

    @property
    def store_queue(self) -> str | None:
        """The queue of this worker's own store (None: a store every replica shares)."""
        return self._store_worker.task_queue if self._store_worker is not None else None

    async def run(self) -> None:
        store = self._store_worker
        if store is None:
            await super().run()
            return
        self._beside = beside = asyncio.create_task(store.run())
        main = asyncio.create_task(super().run())
        try:
            await asyncio.wait({main, beside}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            main.cancel()
            beside.cancel()
            raise
        # Whichever stops first, both stop: never half a replica. (A main worker that
        # stopped before it ran, a plugin's check failing, has nothing to shut down.)
        stopping = [store.shutdown()] if main.done() else [store.shutdown(), super().shutdown()]
        await asyncio.gather(*stopping)
        await asyncio.gather(main, beside)  # the first failure, if any

    async def shutdown(self) -> None:
        if self._store_worker is not None and self._beside is not None:
            await asyncio.gather(super().shutdown(), self._store_worker.shutdown())
        else:
            await super().shutdown()


def build_worker(
    client: Client,
    settings: Settings,
    workflows: Sequence[type] = (AgentWorkflow, PruneWorkflow),
    *,
    registry: AgentRegistry | None = None,
    model_clients: ClientFactory = openai_clients,
    activities: Sequence[Callable[..., Any]] = (),
) -> AgentWorker:
    """Our own worker: the agents of `registry` (default: those of AGENT_MODULES) through
    the same plugin a team adds to its worker, on our task queue and deployment;
    `activities`: a team's own beside ours (the testbed's). With a store of its own (SQLite
    under its data dir) it serves that store's queue too (worker/store_queue.py)."""
    registry = (
        registry
        if registry is not None
        else load_registry(settings.agent_modules, settings.modules_path)
    )
    plugin = DurableAgentsPlugin(
        registry,
        settings=settings,
        workflows=workflows,
        activities=partial(production_activities, model_clients=model_clients),
    )
    own = store_queue(settings.task_queue, open_database(settings))
    return AgentWorker(
        without_our_plugin(client),
        settings,
        own,
        task_queue=settings.task_queue,
        plugins=[plugin],
        activities=list(activities),
        interceptors=[StoreQueueStamp(own)] if own else [],
        graceful_shutdown_timeout=timedelta(seconds=settings.graceful_shutdown_seconds),
        deployment_config=versioning.deployment_config(settings),
        max_cached_workflows=settings.workflow_cache_size,
        # A dead worker's cached workflows move to another worker after this long.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=3),
    )


async def run_worker(settings: Settings) -> None:
    # Before anything else: a module that does not load is a clear error, not a wedged run.
    registry = load_registry(settings.agent_modules, settings.modules_path)
    telemetry.install_tracing(settings)
    runtime = telemetry.runtime_for(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    client = await connect_patiently(settings, runtime, stop)
    if client is None:
        log.info("stopped before Temporal answered")
        return
    worker = build_worker(client, settings, registry=registry)
    gauges = None
    if runtime is not None:
        gauges = asyncio.create_task(
            run_metrics.refresh_forever(
                client, telemetry.RunGauges(runtime.metric_meter), settings.metrics_refresh_seconds
            )
        )
    own = worker.store_queue
    log.info(
        "worker on task queue %r%s at %s serving agents %s; model %s at %s; metrics %s; "
        "tracing %s; encryption %s",
        settings.task_queue,
        f" and its store's {own!r}" if own else "",
        settings.temporal_address,
        ", ".join(sorted(registry.agents)),
        settings.effective_model_name,
        settings.model_base_url,
        f"on :{settings.metrics_port}/metrics" if runtime else "off",
        ", ".join(sorted(settings.trace_exporters)) or "off",
        "on" if settings.encryption_on else "off",
    )
    async with worker:
        _say_which_build(settings, await versioning.ensure_current_build(client, settings))
        await stop.wait()
        log.info("stopping: letting activities in flight finish")
    if gauges is not None:
        gauges.cancel()
    telemetry.flush_tracing()
    log.info("worker stopped")


def _say_which_build(settings: Settings, current: str | None) -> None:
    if not settings.worker_versioning:
        log.info("worker versioning off: every run replays on whatever build picks it up")
        return
    mine = versioning.build_id(settings)
    if current == mine:
        log.info("build %s of deployment %s: new runs start here", mine, settings.deployment_name)
    else:
        log.warning(
            "build %s of deployment %s serves no new run yet (they start on %s): "
            "`agentctl release check`, then `agentctl release promote %s`",
            mine,
            settings.deployment_name,
            current,
            mine,
        )


# Waits between attempts to reach Temporal: doubling, up to this.
MAX_CONNECT_DELAY_SECONDS = 30.0


async def connect_patiently(
    settings: Settings, runtime: Runtime | None, stop: asyncio.Event
) -> Client | None:
    """Reach Temporal as a service does: wait and retry, saying so, until it answers or
    the worker is told to stop (None)."""
    delay = 1.0
    while not stop.is_set():
        try:
            return await connect(settings, runtime=runtime, for_worker=True)
        except TemporalUnreachable as err:
            if err.permanent:  # credentials or certificates: waiting will not mend them
                raise
            log.warning("%s; retrying in %.0f s", err, delay)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
        delay = min(delay * 2, MAX_CONNECT_DELAY_SECONDS)
    return None


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # One line per HTTP request to the model drowns what matters in the log.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    try:
        asyncio.run(run_worker(load_settings()))
    except (
        StoreSchemaNewer,
        telemetry.MetricsUnavailable,
        KeyringError,
        SettingsFileMissing,
        SettingsInvalid,
        ToolDefinitionError,
        versioning.VersioningUnavailable,
        ConnectionSettingsError,
        TemporalUnreachable,
        PluginError,
    ) as err:
        log.error("%s", err)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(2)
    # Skip interpreter finalization: the SDK's core threads can abort it (see starters/cli.py).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
