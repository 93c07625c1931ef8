"""Every file an operator names is read at most a cap and refused in one line when it is
too large, endless, not text, nested too deeply or not the object it must be: taken door
by door from the code's own callers of runtime/operator_files.py (a new caller without a
door here fails `test_every_reader_of_an_operator_file_has_a_door`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

from durable_agents.control import timeline
from durable_agents.infra.offline_model.embedded import free_port
from durable_agents.runtime import operator_files
from durable_agents.starters.cli import app

ROOT = Path(__file__).parents[2]
RUNNER = CliRunner()
# Each command that reads a file an operator names, with {file} where it goes, by the
# module whose code reads it.
DOORS = {
    "starters/cli_options.py": ["run", "goal", "--agent", "invoice", "--policy", "{file}"],
    "starters/cli_people.py": ["edit", "r1", "--file", "{file}"],
    "starters/cli_history.py": ["fork", "r1", "--from-step", "1", "--edit", "{file}"],
    "control/timeline.py": ["replay", "{file}"],
}
# What each door needs of the file beyond being JSON: a patch is an object.
OBJECT_ONLY = {"starters/cli_people.py", "starters/cli_history.py"}


def test_every_reader_of_an_operator_file_has_a_door():
    readers = {
        str(path.relative_to(ROOT))
        for folder in ("starters", "control", "console", "runtime", "activities", "worker")
        for path in (ROOT / folder).rglob("*.py")
        if any(
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "operator_files"
            and node.attr.startswith("load")
            for node in ast.walk(ast.parse(path.read_text()))
        )
    }
    assert readers == set(DOORS)


def files(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """Each bad file, and what its refusal says."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 3_000)  # past the parser's depth, under every cap here
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{}")
    listed = tmp_path / "listed.json"
    listed.write_text("[1, 2]")
    return {
        "endless": ("/dev/zero", "larger than"),
        "deep": (str(deep), "nested too deeply"),
        "binary": (str(binary), "not UTF-8"),
        "a list": (str(listed), "must be a JSON object"),
    }


@pytest.mark.parametrize("door", sorted(DOORS))
@pytest.mark.parametrize("bad", ["endless", "deep", "binary", "a list"])
def test_a_bad_file_is_refused_in_one_line_before_anything_connects(
    tmp_path, monkeypatch, door, bad
):
    if bad == "a list" and door not in OBJECT_ONLY:
        pytest.skip("a list is valid JSON here; its own check refuses it after")
    # A history's cap is 256 MiB: a small one here, so /dev/zero is refused quickly.
    monkeypatch.setattr(operator_files, "HISTORY_FILE_BYTES", 4096)
    path, says = files(tmp_path)[bad]
    command = [path if arg == "{file}" else arg for arg in DOORS[door]]
    result = RUNNER.invoke(app, command, env={"AGENT_TEMPORAL_PORT": str(free_port())})
    output = result.stdout + result.stderr
    assert ("Traceback" not in output and result.exception is None) or isinstance(
        result.exception, SystemExit
    ), output
    assert result.exit_code != 0, output
    [line] = [line for line in output.splitlines() if says in line]
    assert path in line, output


def test_a_history_file_is_read_only_up_to_its_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(operator_files, "HISTORY_FILE_BYTES", 10)
    history = tmp_path / "run.json"
    history.write_text('{"events": []}')
    with pytest.raises(ValueError, match="larger than 10 bytes"):
        timeline.agent_history(history)


def test_a_set_value_nested_too_deeply_is_taken_as_text():
    """`agentctl edit --set goal=[[[...`: what does not parse as JSON is text, as any other
    value that is no JSON."""
    from durable_agents.starters.cli_people import parse_assignments

    value = "[" * 3_000
    assert parse_assignments([f"goal={value}"]) == {"goal": value}
