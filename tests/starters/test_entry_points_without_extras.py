"""Every program of ours, run without its extra, says in one line which extra to install
and exits non-zero: never a ModuleNotFoundError traceback. The programs are read from the
code (pyproject's scripts, the `python -m` targets the docs, the deployment files and the
local stack name); each is run as a person runs it, with its extra's distributions not
installed: all at once, and each alone (a part that does not need one runs on)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from durable_agents.infra.offline_model.embedded import free_port
from durable_agents.infra.stack import part_specs
from durable_agents.runtime.extras import EXTRAS, install_hint
from durable_agents.runtime.settings import Settings
from tests.runtime.test_extras import declared_extras, modules_of
from tests.starters.not_installed import env_without

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Each program, and the extra it needs (None: the core's). agentctl's verbs each say which.
NEEDS: dict[tuple[str, ...], str | None] = {
    ("agentctl", "up"): "local",
    ("agentctl", "demo"): "local",
    ("agentctl", "console"): "console",
    ("durable_agents.console",): "console",
    ("durable_agents.worker.codec_server",): "console",
    ("durable_agents.infra.offline_model",): "local",
    ("durable_agents.examples.kb_server",): "mcp",
    ("durable_agents.worker",): None,
}
# examples/kb_server.py, a team's example MCP server, imports mcp at its top.
NOT_YET = {("durable_agents.examples.kb_server",)}

MODULE_RUN = re.compile(r"""-m"?,?\s*"?(durable_agents(?:\.\w+)+)""")


def named_programs() -> set[str]:
    """The programs the code names: pyproject's scripts, and every `python -m` target of
    the docs, the deployment files, our own messages and the local stack's parts."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = set(project["scripts"])
    texts = [ROOT / "README.md", ROOT / "Dockerfile", ROOT / "docker-compose.yml"]
    texts += sorted((ROOT / "docs").rglob("*.md"))
    texts += sorted((ROOT / "infra").rglob("*.y*ml"))
    for package in ("activities", "console", "control", "infra", "runtime", "starters", "worker"):
        texts += sorted((ROOT / package).rglob("*.py"))
    for text in texts:
        found |= set(MODULE_RUN.findall(text.read_text()))
    settings = Settings(data_dir=Path("/nonexistent"), encryption_keys="k1=" + "A" * 43 + "=")
    for spec in part_specs(settings):
        if "-m" in spec.argv:
            found.add(spec.argv[spec.argv.index("-m") + 1])
    return found


def test_every_program_the_code_names_is_in_the_table():
    assert named_programs() == {program[0] for program in NEEDS}


def runs() -> list[object]:
    """(program, extra, the modules made missing): the extra's whole, then each of its
    distributions alone."""
    found: list[object] = []
    for program, extra in NEEDS.items():
        if extra is None:
            continue
        marks = [pytest.mark.xfail(strict=True)] if program in NOT_YET else []
        modules = {d: modules_of(d) for d in sorted(declared_extras()[extra]) if modules_of(d)}
        cases = {"all": set().union(*modules.values()), **modules}
        for name, gone in cases.items():
            label = f"{' '.join(program)}-without-{name}"
            found.append(pytest.param(program, extra, sorted(gone), name, marks=marks, id=label))
    return found


@pytest.mark.parametrize(("program", "extra", "gone", "case"), runs())
def test_a_program_without_its_extra_names_it_in_one_line(program, extra, gone, case, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_"))}
    env |= {
        "AGENT_DATA_DIR": str(tmp_path / "data"),
        # Nothing answers there: a program that gets past its check ends at once.
        "AGENT_TEMPORAL_PORT": str(free_port()),
        "AGENT_OFFLINE_MODEL_PORT": str(free_port()),
        "AGENT_CONSOLE_PORT": str(free_port()),
        "AGENT_CODEC_PORT": str(free_port()),
        "AGENT_TEMPORAL_UI_PORT": str(free_port()),
    }
    if program[0] == "agentctl":
        argv = [str(BIN / "agentctl"), *program[1:]]
    else:
        argv = [sys.executable, "-m", *program]
        if program[0].endswith("offline_model"):
            argv += ["--port", env["AGENT_OFFLINE_MODEL_PORT"]]
    try:
        done = subprocess.run(
            argv,
            env=env_without(gone, tmp_path / "site", env),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,  # a guard for a program that got past its check and serves
        )
    finally:
        if program[0] == "agentctl":  # a check that let `up` through started a stack
            subprocess.run([str(BIN / "agentctl"), "down"], env=env, capture_output=True)
    said = done.stdout + done.stderr
    assert "Traceback" not in said and "ModuleNotFoundError" not in said, said
    assert done.returncode != 0, said
    line = f"needs the [{extra}] extra: {install_hint(extra)}"
    if case == "all" or line in said:
        [error] = done.stderr.strip().splitlines()
        assert error.startswith("error: ") and error.endswith(line), said


def test_the_modules_made_missing_are_missing(tmp_path):
    """The harness itself: what it names is not importable, and only that."""
    env = env_without(EXTRAS["console"], tmp_path, dict(os.environ))
    code = "import importlib.util as u; print(u.find_spec('rich') is not None); import fastapi"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert done.stdout.strip() == "True"
    assert "ModuleNotFoundError: No module named 'fastapi'" in done.stderr
