"""An isolated stack for benchmarks: a dev server, the offline model over HTTP, a worker."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from temporalio.api.history.v1 import History
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from bench.cpu import child_pid
from durable_agents.control.timeline import fetch_chain
from durable_agents.infra.binaries import temporal_cli
from durable_agents.infra.offline_model.embedded import free_port
from durable_agents.infra.processes import stop
from durable_agents.infra.stack import files_for, part_specs, start_part
from durable_agents.runtime.settings import Settings
from durable_agents.worker.main import build_worker
from durable_agents.workflows import search_attributes as sa


@dataclass
class Bench:
    client: Client
    settings: Settings


@dataclass
class Services:
    """A dev server with our search attributes and the offline model in its own process."""

    env: WorkflowEnvironment
    model_port: int

    @property
    def address(self) -> str:
        return self.env.client.service_client.config.target_host

    @property
    def server_pid(self) -> int:
        port = self.address.rpartition(":")[2]
        pid = child_pid("temporal", port)
        if pid is None:
            raise RuntimeError(f"no dev server process of ours listens on port {port}")
        return pid

    @property
    def model_url(self) -> str:
        return f"http://127.0.0.1:{self.model_port}/v1"


@asynccontextmanager
async def bench_services() -> AsyncIterator[Services]:
    """The offline model runs in its own process, as it does in the local stack: it plays
    the model provider, whose cost is not ours to measure."""
    with tempfile.TemporaryDirectory() as model_dir:
        model_settings = Settings(data_dir=Path(model_dir), offline_model_port=free_port())
        spec = next(s for s in part_specs(model_settings) if s.name == "model")
        await start_part(spec, model_settings, lambda _: None)
        try:
            env = await WorkflowEnvironment.start_local(
                dev_server_existing_path=str(temporal_cli()),
                search_attributes=sa.ALL,
                data_converter=pydantic_data_converter,
                dev_server_log_level="error",
            )
            try:
                yield Services(env=env, model_port=model_settings.offline_model_port)
            finally:
                await env.shutdown()
        finally:
            stop(files_for(model_settings, "model"))


def bench_settings(
    address: str, model_port: int, data_dir: Path, task_queue: str = "bench"
) -> Settings:
    """Our worker's settings against the benchmark's dev server and offline model."""
    host, _, port = address.rpartition(":")
    return Settings(
        data_dir=data_dir,
        temporal_host=host,
        temporal_port=int(port),
        task_queue=task_queue,
        offline_model_port=model_port,
        namespace_is_ours_alone=True,  # the benchmark's own dev server: nobody else polls it
    )


@asynccontextmanager
async def bench_stack() -> AsyncIterator[Bench]:
    """The shared services and our worker in this process."""
    async with bench_services() as services:
        with tempfile.TemporaryDirectory() as data_dir:
            settings = bench_settings(services.address, services.model_port, Path(data_dir))
            async with build_worker(services.env.client, settings):
                yield Bench(client=services.env.client, settings=settings)


async def history_bytes(client: Client, workflow_id: str) -> tuple[int, int, int]:
    """(bytes, events, runs) of a run's history over its whole continue-as-new chain, as
    the server stores and limits it (each run's history on its own)."""
    chain = await fetch_chain(client, workflow_id)
    size = sum(History(events=history.events).ByteSize() for _, history in chain)
    events = sum(len(history.events) for _, history in chain)
    return size, events, len(chain)
