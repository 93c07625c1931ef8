"""docs/testing-your-workflows.md, executed: a team's OrderWorkflow that calls an agent
and its own activity, tested on the time-skipping server through the public API only
(the guide's files written out and its test run as written), its history replayed, and a
replay under another workflow id failing as the guide says. Also: a server without our
search attributes is refused in one line, and a missing test server names the extra."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from durable_agents.infra import binaries
from durable_agents.infra.binaries import temporal_cli
from durable_agents.testing import (
    AgentTestbed,
    ScriptedModel,
    SearchAttributesMissing,
    TestServerMissing,
    say,
)
from tests.calling.billing import triage
from tests.conftest import _startup_timeout

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "testing-your-workflows.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
FILES = ("shop_agents", "orders", "test_orders")


def files() -> dict[str, str]:
    """The guide's Python files, by the name on their first line."""
    found = {}
    for text in (body for lang, body in BLOCK.findall(GUIDE.read_text()) if lang == "python"):
        name = re.match(r"# (\w+)\.py\n", text)
        if name:
            found[name.group(1)] = text
    return found


@pytest.fixture
def guide_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in files().items():
        (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in FILES:
        sys.modules.pop(name, None)
    return tmp_path


def test_the_guide_holds_the_teams_files_and_uses_only_the_public_api():
    texts = files()
    assert sorted(texts) == sorted(FILES)
    ours = set()
    for text in texts.values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("durable"):
                ours.add(node.module)
    assert ours == {"durable_agents", "durable_agents.testing"}
    # The workflow takes the agent's answer typed, without naming its type.
    assert "run_agent(support, f" in texts["orders"]
    # A blocked workflow (an activity the testbed did not register) fails the test at
    # once on the time-skipping server instead of hanging it.
    assert "execution_timeout=timedelta(" in texts["test_orders"]


async def test_the_guides_order_workflow_test_passes_as_written(guide_dir):
    """The team's workflow, its activity and the agent on one testbed: the typed answer
    branches to reserve_inventory; the history replays, and not under another id."""
    module = importlib.import_module("test_orders")
    [test] = [f for name, f in inspect.getmembers(module) if name.startswith("test_")]
    await test()


async def test_a_server_without_our_search_attributes_is_refused_in_one_line():
    """A dev server started without them: the testbed says so before any run, instead of
    the agent's run failing its workflow task on every try."""
    bare = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
        **_startup_timeout(WorkflowEnvironment.start_local, "dev_server_startup_timeout"),
    )
    try:
        with pytest.raises(SearchAttributesMissing) as refused:
            async with AgentTestbed(triage, model=ScriptedModel([say("x")]), env=bare):
                pass
    finally:
        await bare.shutdown()
    said = str(refused.value)
    assert "\n" not in said
    assert "lacks the search attributes AgentStatus, AgentStep, AgentWaitingFor" in said
    assert "agentctl setup" in said and "register_search_attributes(client)" in said


async def test_no_test_server_names_the_extra_and_downloads_nothing(monkeypatch):
    def missing() -> Path:
        raise binaries.BinaryMissing("`temporal-test-server` not found")

    monkeypatch.setattr("durable_agents.testing.temporal_test_server", missing)
    with pytest.raises(TestServerMissing) as refused:
        async with AgentTestbed(triage, model=ScriptedModel([say("x")])):
            pass
    assert str(refused.value) == (
        "Temporal's time-skipping test server is not installed: "
        "pip install 'durable-agents-temporal[testing]'"
    )
