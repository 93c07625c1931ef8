"""docs/architecture.md's "To change X, touch these files" holds: every file a row names
exists and every name it gives is defined in one of its files, and where the code can
say what a row claims (the activities a worker registers, the budget's figures, the
parts the workflow wires), it is checked here."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

from temporalio import activity

from durable_agents.console.actions import BudgetForm
from durable_agents.runtime.settings import Settings
from durable_agents.starters import cli_people
from durable_agents.worker.activities import production_activities
from durable_agents.workflows import activity_options
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contract_base import BudgetLimits
from durable_agents.workflows.contracts import RunBudget
from durable_agents.workflows.people_inputs import BudgetRaise
from durable_agents.workflows.phases.context import Phase
from durable_agents.workflows.registry import AgentRegistry

ROOT = Path(__file__).parents[2]
ROWS_WANTED = {
    "add a signal or an update", "add a tool risk", "add a budget kind", "add an event kind",
    "add an activity", "add a phase", "add a what-if behaviour",
}  # fmt: skip


def change_map() -> dict[str, str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## To change X, touch these files", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| ")]
    return {row[1].strip(): row[2] for row in rows[1:]}


def files_of(cell: str) -> list[Path]:
    """The files a row names, relative to the repository or to workflows/."""
    found = []
    for name in re.findall(r"`([\w./-]+\.(?:py|md|html))`", cell):
        candidates = [ROOT / name, ROOT / "workflows" / name, ROOT / "durable_agents" / name]
        where = next((path for path in candidates if path.exists()), None)
        assert where is not None, f"{name} is named in the change map but does not exist"
        found.append(where)
    return found


def test_the_map_has_a_row_for_each_change_and_names_real_files():
    rows = change_map()
    assert set(rows) >= ROWS_WANTED
    for name, cell in rows.items():
        assert files_of(cell), name


def test_every_name_a_row_gives_is_defined_in_one_of_its_files():
    for row, cell in change_map().items():
        sources = " ".join(path.read_text() for path in files_of(cell))
        for token in re.findall(r"`([A-Za-z_][\w.]*)(?:\(\))?`", cell):
            if re.search(r"\.(py|md|html)$", token):
                continue
            name = token.rsplit(".", 1)[-1]
            assert re.search(rf"\b{name}\b", sources), f"{row}: {name} is in none of its files"


def test_every_activity_the_workflow_calls_is_one_a_worker_registers(tmp_path):
    called = {
        value
        for name, value in vars(activity_options).items()
        if name.isupper() and isinstance(value, str) and not name.startswith("_")
    }
    settings = Settings(data_dir=tmp_path)
    registered = {
        activity._Definition.must_from_callable(fn).name
        for fn in production_activities(None, settings, AgentRegistry())  # type: ignore[arg-type]
    }
    assert called and called <= registered, called - registered


def test_no_part_calls_an_activity_but_through_call_activity():
    """The agent workflow's own code (the prune workflow is another workflow)."""
    for path in [ROOT / "workflows" / "agent.py", *(ROOT / "workflows" / "phases").glob("*.py")]:
        if path.name == "activity_call.py":
            continue
        text = path.read_text()
        assert "execute_activity(" not in text and "execute_local_activity(" not in text, path


def test_the_budgets_figures_are_one_set_everywhere():
    figures = set(BudgetLimits.model_fields)
    assert figures == {"usd", "tokens", "tool_calls", "seconds"}
    for model in (RunBudget, BudgetRaise, BudgetForm):
        assert issubclass(model, BudgetLimits)
        for name in figures:
            assert model.model_fields[name].metadata == BudgetLimits.model_fields[name].metadata
    options = set(inspect.signature(cli_people.budget).parameters)
    assert figures <= options
    panel = (ROOT / "console" / "templates" / "panel.html").read_text()
    assert figures <= set(re.findall(r'name="(\w+)"', panel))


def test_every_part_is_wired_by_the_workflow():
    parts = set()
    for path in (ROOT / "workflows" / "phases").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(base, ast.Name) and base.id == "Phase" for base in node.bases
            ):
                parts.add(node.name)
    wiring = inspect.getsource(AgentWorkflow)
    assert parts and Phase.__name__ == "Phase"
    for part in parts - {"Story"}:  # the story is the class's story_type
        assert f"{part}(" in wiring, part
    assert "self.story_type(" in wiring and AgentWorkflow.story_type.__name__ == "Story"
