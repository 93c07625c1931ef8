"""MCP tools against a real MCP server built with the `mcp` package (tests/mcp/server.py):
over stdio on the time-skipping server, over streamable HTTP on the dev server; risks as
declared, undeclared tools approved by a person, the idempotency key in `_meta`, a server
that dies in the middle of a call, and a tool list that changes under a recorded run."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from durable_agents import Agent, MCPServer, ToolRisk
from durable_agents.control import runs, timeline
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.registry import AgentRegistry
from tests.conftest import eventually, run_id

RISKS = {"echo": ToolRisk.READ_ONLY, "charge": ToolRisk.SIDE_EFFECT, "fl*": ToolRisk.SIDE_EFFECT}


def stdio_agent(where: Path) -> Agent:
    server = MCPServer(
        "t", command=[sys.executable, "-m", "tests.mcp.server", str(where)], risks=RISKS
    )
    return Agent(
        name="mcp-user", instructions="Use the tools.", mcp_servers=[server], planning=False
    )


def calls_at(where: Path) -> list[dict[str, Any]]:
    log = where / "calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def test_mcp_tools_over_stdio_run_with_their_declared_risks(time_env, tmp_path):
    model = ScriptedModel([call("echo", text="hi"), call("charge", amount=5), say("Done.")])
    async with AgentTestbed(stdio_agent(tmp_path), model=model, env=time_env) as bed:
        run = await bed.start("mcp-user", "Use the tools")
        result = await run.result()
        state = await run.state()
    assert result.status == "completed", result
    assert state.agent is not None
    recorded = {t.name: t.risk.value for t in state.agent.tools}
    assert recorded == {
        "echo": "read_only", "charge": "side_effect", "flaky": "side_effect",
        "wipe": "needs_approval",  # declared by nobody
    }  # fmt: skip
    echo, charge = calls_at(tmp_path)
    assert echo == {"tool": "echo", "key": None, "arguments": {"text": "hi"}}
    assert charge["key"] == f"{state.store_key}/step-1/call_1_0"
    shown = {t.name: t.parameters for t in model.requests[0].tools}
    assert shown["charge"]["properties"]["amount"]["type"] == "integer"
    assert [r.summary for r in state.results] == ["echo: hi", "charged 5 (charges: 1)"]


async def test_an_undeclared_mcp_tool_waits_for_a_person(time_env, tmp_path):
    model = ScriptedModel([call("wipe"), say("Not wiped.")])
    async with AgentTestbed(stdio_agent(tmp_path), model=model, env=time_env) as bed:
        run = await bed.start("mcp-user", "Wipe it")
        request = await run.next_approval()
        await run.reject(request.request_id, by="alice", comment="no")
        result = await run.result()
    assert request.tool == "wipe" and "declared as needing approval" in request.rule
    assert result.status == "completed"
    assert calls_at(tmp_path) == []  # never called
    assert model.requests[-1].messages[-1]["content"].startswith("rejected by alice: no")


async def test_a_server_that_dies_mid_call_is_retried_under_the_same_key(time_env, tmp_path):
    model = ScriptedModel([call("flaky", text="x"), say("Done.")])
    async with AgentTestbed(stdio_agent(tmp_path), model=model, env=time_env) as bed:
        run = await bed.start("mcp-user", "Call flaky")
        result = await run.result()
        state = await run.state()
    first, second = calls_at(tmp_path)
    assert (tmp_path / "died").exists()
    assert first["key"] == second["key"] == f"{state.store_key}/step-1/call_0_0"
    assert result.status == "completed" and state.results[0].summary == "flaky: x"


async def test_a_changed_tool_list_does_not_break_replay(time_env, tmp_path):
    agent = stdio_agent(tmp_path)
    model = ScriptedModel([call("echo", text="a"), say("Done.")])
    async with AgentTestbed(agent, model=model, env=time_env) as bed:
        before = await bed.start("mcp-user", "Echo")
        await before.result()
        (tmp_path / "tools-v2").write_text("")  # the server now lists archive, not wipe
        history = await timeline.fetch_history(bed.client.temporal, before.run_id)
        await timeline.replayer(agents=bed.registry).replay_workflow(history)
        after = await bed.start("mcp-user", "Echo again")
        await after.result()
        old, new = (await before.state()).agent, (await after.state()).agent
    assert old is not None and new is not None
    assert "wipe" in {t.name for t in old.tools} and "archive" not in {t.name for t in old.tools}
    assert "archive" in {t.name for t in new.tools} and "wipe" not in {t.name for t in new.tools}


# -- streamable HTTP, on the dev server: a server process the test can kill and restart ---
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_server(where: Path, port: int, token: str) -> subprocess.Popen[bytes]:
    log = (where / "server.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "tests.mcp.server", str(where), "--http", str(port)],
        env={**os.environ, "TEST_MCP_TOKEN": token},
        stdout=log,
        stderr=subprocess.STDOUT,
    )


async def listening(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    return True


def http_agent(port: int) -> Agent:
    server = MCPServer("web", url=f"http://127.0.0.1:{port}/mcp", risks=RISKS)
    return Agent(
        name="mcp-web", instructions="Use the tools.", mcp_servers=[server], planning=False
    )


async def test_mcp_over_http_with_headers_from_settings_and_a_server_that_dies(
    dev_env, settings, tmp_path
):
    port, token = free_port(), "s3cret-token"
    server = http_server(tmp_path, port, token)
    settings.mcp_headers = {"web": {"Authorization": f"Bearer {token}"}}
    model = ScriptedModel([call("echo", text="hi"), call("flaky", text="y"), say("Done.")])
    registry = AgentRegistry().add(http_agent(port))
    restarted: list[subprocess.Popen[bytes]] = []
    try:
        await eventually(lambda: listening(port), within=30)
        async with build_worker(
            dev_env.client, settings, registry=registry, model_clients=lambda s, m: model
        ):
            rid = run_id("mcp-http")
            request = RunRequest(goal="Use the web tools", agent="mcp-web")
            await runs.start_run(dev_env.client, settings, request, rid)
            # the server dies in the middle of flaky; it comes back, and the retry gets through
            await eventually(lambda: _exited(server), within=30)
            restarted.append(http_server(tmp_path, port, token))
            result = await runs.wait_result(dev_env.client, rid)
            state = await runs.get_state(dev_env.client, rid)
        history = await timeline.fetch_history(dev_env.client, rid)
    finally:
        for process in [server, *restarted]:
            process.kill()
            process.wait(10)
    assert result.status == "completed", result
    assert [r.summary for r in state.results] == ["echo: hi", "flaky: y"]
    flaky = [c for c in calls_at(tmp_path) if c["tool"] == "flaky"]
    assert len(flaky) == 2 and flaky[0]["key"] == flaky[1]["key"] is not None
    assert token not in history.to_json()  # the headers stay in the worker's settings


async def _exited(process: subprocess.Popen[bytes]) -> bool:
    return process.poll() is not None
