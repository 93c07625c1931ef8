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

from infra.binaries import temporal_cli
from infra.offline_model.embedded import free_port
from infra.processes import stop
from infra.stack import files_for, part_specs, start_part
from starters.timeline import fetch_chain
from worker.main import build_worker
from worker.settings import Settings
from workflows import search_attributes as sa


@dataclass
class Bench:
    client: Client
    settings: Settings


@asynccontextmanager
async def bench_stack() -> AsyncIterator[Bench]:
    """The offline model runs in its own process, as it does in the local stack: it plays
    the model provider, whose cost is not ours to measure."""
    with tempfile.TemporaryDirectory() as model_dir:
        model_settings = Settings(data_dir=Path(model_dir), offline_model_port=free_port())
        spec = next(s for s in part_specs(model_settings) if s.name == "model")
        await start_part(spec, model_settings, lambda _: None)
        try:
            async with _with_model(model_settings.offline_model_port) as bench:
                yield bench
        finally:
            stop(files_for(model_settings, "model"))


@asynccontextmanager
async def _with_model(model_port: int) -> AsyncIterator[Bench]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        search_attributes=sa.ALL,
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
    )
    with tempfile.TemporaryDirectory() as data_dir:
        host, _, grpc_port = env.client.service_client.config.target_host.rpartition(":")
        settings = Settings(
            data_dir=Path(data_dir),
            temporal_host=host,
            temporal_port=int(grpc_port),
            task_queue="bench",
            offline_model_port=model_port,
        )
        try:
            async with build_worker(env.client, settings):
                yield Bench(client=env.client, settings=settings)
        finally:
            await env.shutdown()


async def history_bytes(client: Client, workflow_id: str) -> tuple[int, int, int]:
    """(bytes, events, runs) of a run's history over its whole continue-as-new chain, as
    the server stores and limits it (each run's history on its own)."""
    chain = await fetch_chain(client, workflow_id)
    size = sum(History(events=history.events).ByteSize() for _, history in chain)
    events = sum(len(history.events) for _, history in chain)
    return size, events, len(chain)
