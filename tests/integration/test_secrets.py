"""Invariant 7: the model API key is read by the worker alone, from its environment, and
never reaches the history, our stores, the worker's log or its spans."""

from __future__ import annotations

import httpx

from durable_agents.control import runs
from durable_agents.infra.offline_model.server import key_digest
from durable_agents.infra.stack import worker_polling
from durable_agents.workflows.contracts import RunRequest
from tests.conftest import eventually, run_id, spawn_worker

API_KEY = "sk-test-Quartz-Heron-5521-do-not-leak"


async def test_the_api_key_never_leaves_the_worker(dev_env, settings, model_server, tmp_path):
    client, rid = dev_env.client, run_id("key")
    log = tmp_path / "worker.log"
    worker = spawn_worker(
        settings,
        log,
        OPENAI_API_KEY=API_KEY,
        OPENAI_BASE_URL=model_server.base_url,
        OTEL_TRACES_EXPORTER="console",  # spans go to the worker's log, to be searched
    )
    try:
        await eventually(lambda: worker_polling(settings), within=30)
        request = RunRequest(goal="report", label="long?steps=3")
        await runs.start_run(client, settings, request, rid)
        assert (await runs.wait_result(client, rid)).status == "completed"
    finally:
        worker.terminate()
        worker.wait(timeout=30)

    # The worker did use the key: the model endpoint saw it (kept there only as a digest).
    async with httpx.AsyncClient() as http:
        stats = (await http.get(f"{model_server.base_url}/scripted/stats", timeout=5)).json()
    assert stats["totals"].get(f"key_{key_digest(API_KEY)}", 0) >= 3

    secret = API_KEY.encode()
    history = await client.get_workflow_handle(rid).fetch_history()
    assert history.events and secret not in b"".join(e.SerializeToString() for e in history.events)
    files = [p for p in settings.data_dir.rglob("*") if p.is_file()]
    assert any(p.name.startswith("agent.sqlite3") for p in files)
    for path in files:
        assert secret not in path.read_bytes(), path
    logged = log.read_bytes()
    assert b'"gen_ai.request.model"' in logged  # the spans were exported to this log
    assert secret not in logged
