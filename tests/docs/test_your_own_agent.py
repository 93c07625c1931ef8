"""docs/your-own-agent.md, executed: its Python files are written out and imported, and
its tests are run. Its shell commands are run as written, against a local stack of their
own, by tests/docs/test_docs_run_as_written.py. If the guide drifts from the code, one of
the two fails."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

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
