"""A worker started before Temporal waits and retries, saying so, as a service does; it
stops cleanly on SIGTERM meanwhile."""

from __future__ import annotations

import asyncio
import signal

from durable_agents.infra.offline_model.embedded import free_port
from tests.conftest import eventually, spawn_worker


async def test_a_worker_waits_for_temporal_then_stops_on_sigterm(settings, tmp_path):
    log = tmp_path / "worker.log"
    down = settings.model_copy(update={"temporal_port": free_port()})
    worker = spawn_worker(down, log)
    try:

        async def retrying() -> bool:
            text = log.read_text() if log.exists() else ""
            return text.count("cannot reach Temporal") >= 2

        await eventually(retrying, within=30)
        assert "(plaintext): connection refused; retrying in" in log.read_text()
        worker.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(worker.wait, 30) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
    assert "Traceback" not in log.read_text()
    assert "stopped before Temporal answered" in log.read_text()
