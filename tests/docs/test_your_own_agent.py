"""docs/your-own-agent.md, executed: its Python files are written out and imported, its
test is run, and its shell commands are run against a dev server with a worker serving
the guide's module. If the guide drifts from the code, this fails."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import re
import shlex
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from durable_agents.infra.stack import settings_env, worker_polling
from durable_agents.starters.cli import app
from tests.conftest import eventually, spawn_worker_of

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "your-own-agent.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)


def blocks(kind: str) -> list[str]:
    return [text for lang, text in BLOCK.findall(GUIDE.read_text()) if lang == kind]


GUIDE_MODULES = (
    "support_agent", "test_support_agent", "rules", "desk", "test_desk",
    "test_support_chat", "gateway_client", "test_gateway_client", "test_support_memory",
)  # fmt: skip


@pytest.fixture
def guide_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The guide's Python files, each named by its first line, importable."""
    for text in blocks("python"):
        name = re.match(r"# (\w+\.py)\n", text)
        assert name, f"a Python block must start with its file name: {text[:40]!r}"
        (tmp_path / name.group(1)).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in GUIDE_MODULES:
        sys.modules.pop(module, None)
    return tmp_path


@pytest.mark.parametrize(
    "module_name",
    [
        "test_support_agent",
        "test_desk",
        "test_support_chat",
        "test_gateway_client",
        "test_support_memory",
    ],
)
async def test_the_guides_tests_pass(guide_dir, module_name, monkeypatch, model_server):
    monkeypatch.setenv("KB_DIR", str(guide_dir / "kb"))  # the desk's MCP server's notes
    monkeypatch.setenv("GATEWAY_URL", model_server.base_url)  # a real endpoint for it
    module = importlib.import_module(module_name)
    tests = [f for name, f in inspect.getmembers(module) if name.startswith("test_")]
    assert len(tests) == 1
    await tests[0]()


def test_the_guides_rules_module_declares_a_valid_agent(guide_dir):
    rules = importlib.import_module("rules")
    assert [getattr(r, "name", None) or r.__name__ for r in rules.careful_support.rules] == [
        "small_refunds_only",
        "fraud_check",
    ]


async def test_the_guides_commands_run_the_agent(guide_dir, dev_env, settings, tmp_path):
    listing, session = (block.strip().splitlines() for block in blocks("sh"))
    exports = dict(pair.split("=", 1) for pair in shlex.split(listing[0].removeprefix("export ")))
    assert exports == {"AGENT_MODULES": "support_agent"}
    env = settings_env(settings) | {"AGENT_MODULES": "support_agent"}
    runner = CliRunner()

    def agentctl(line: str) -> str:
        args = shlex.split(line)[1:]
        result = runner.invoke(app, args, env=env)
        assert result.exit_code == 0, (line, result.stdout, result.stderr)
        return result.stdout

    assert listing[1] == "agentctl agents"
    listed = json.loads(agentctl("agentctl agents --json"))
    assert [(t["name"], t["risk"]) for t in listed[0]["tools"]] == [
        ("look_up_order", "read_only"),
        ("refund_order", "needs_approval"),
    ]
    assert "refund_order" in agentctl(listing[1])

    # `agentctl up` starts the local stack; here the dev server is the test's, and the
    # worker serves the guide's module as `agentctl up` would with AGENT_MODULES set.
    assert session[0] == "agentctl up"
    # Started in the guide's folder, as a user would: the module is found there.
    worker = spawn_worker_of(
        guide_dir, settings, tmp_path / "worker.log", AGENT_MODULES="support_agent"
    )
    try:
        await eventually(lambda: worker_polling(settings), within=30)
        started = await asyncio.to_thread(agentctl, session[1])
        run_id = re.search(r"started run (\S+)", started).group(1)  # type: ignore[union-attr]

        async def in_inbox() -> bool:
            return run_id in await asyncio.to_thread(agentctl, session[2])

        await eventually(in_inbox, within=60)
        await asyncio.to_thread(agentctl, session[3].replace("<run id>", run_id))

        async def done() -> bool:
            shown = await asyncio.to_thread(agentctl, session[4].replace("<run id>", run_id))
            return "completed" in shown

        await eventually(done, within=60)
    finally:
        worker.terminate()
        await asyncio.to_thread(worker.wait, 30)
    billing = (settings.data_dir / "billing.sqlite3").exists()
    assert billing, "the refund reached the guide's billing database"
