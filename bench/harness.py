"""An isolated stack for benchmarks: a dev server, the offline model over HTTP, a worker."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from temporalio.api.history.v1 import History
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from infra.binaries import temporal_cli
from infra.offline_model.server import create_app
from infra.processes import port_in_use
from worker.main import build_worker
from worker.settings import Settings
from workflows import search_attributes as sa


@dataclass
class Bench:
    client: Client
    settings: Settings


def _free_port(start: int = 18765) -> int:
    port = start
    while port_in_use(port):
        port += 1
    return port


@asynccontextmanager
async def bench_stack() -> AsyncIterator[Bench]:
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
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
            offline_model_port=port,
        )
        try:
            async with build_worker(env.client, settings):
                yield Bench(client=env.client, settings=settings)
        finally:
            await env.shutdown()
            server.should_exit = True
            thread.join(timeout=5)


async def history_bytes(client: Client, workflow_id: str) -> tuple[int, int]:
    """(bytes, events) of a workflow's history, as the server stores and limits it."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    proto = History(events=history.events)
    return proto.ByteSize(), len(history.events)
