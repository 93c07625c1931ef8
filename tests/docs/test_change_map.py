"""docs/architecture.md's "To change X, touch these files" holds: every file a row names
exists and every name it gives is defined in one of its files, and where the code can
say what a row claims (the activities a worker registers, the budget's figures, the
parts the workflow wires), it is checked here."""

from __future__ import annotations

import ast
import inspect
import re
import typing
from collections.abc import Iterator
from pathlib import Path

from temporalio import activity

from durable_agents.console.actions import BudgetForm
from durable_agents.runtime.settings import Settings
from durable_agents.starters import cli_people
from durable_agents.starters.cli_options import START_FLAGS
from durable_agents.worker.activities import production_activities
from durable_agents.workflows import activity_options, people_inputs, signed_changes
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contract_base import BudgetLimits
from durable_agents.workflows.contracts import RunBudget
from durable_agents.workflows.people_inputs import BudgetRaise, SignedDecision
from durable_agents.workflows.phases.context import Phase
from durable_agents.workflows.records import ApprovalRequest, RequestKind
from durable_agents.workflows.registry import AgentRegistry
from durable_agents.workflows.start_options import StartOptions

ROOT = Path(__file__).parents[2]
ROWS_WANTED = {
    "add a signal or an update", "add a tool risk", "add a budget kind", "add an event kind",
    "add an activity", "add a phase", "add a what-if behaviour", "add a start option",
    "add a kind of person decision",
}  # fmt: skip
# The package's own code, where a change is made (its tests, benchmark, examples and
# offline model are not).
SOURCES = ("activities", "console", "control", "runtime", "starters", "worker", "workflows")


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
    folders = (ROOT / "workflows" / "phases", ROOT / "workflows" / "beginnings")
    for path in [p for folder in folders for p in folder.glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                ast.unparse(base).split("[")[0] == "Phase" for base in node.bases
            ):
                parts.add(node.name)
    wiring = inspect.getsource(AgentWorkflow)
    assert len(parts) >= 12 and Phase.__name__ == "Phase"
    for part in parts - {"Story"}:  # the story is the class's story_type
        assert f"{part}(" in wiring, part
    assert "self.story_type(" in wiring and AgentWorkflow.story_type.__name__ == "Story"


def package_modules() -> Iterator[tuple[Path, ast.Module]]:
    """Every module of the package's own code, parsed, by its path in the repository."""
    paths = [path for folder in SOURCES for path in (ROOT / folder).rglob("*.py")]
    for path in sorted([*paths, *(ROOT / "durable_agents").glob("*.py")]):
        yield path.relative_to(ROOT), ast.parse(path.read_text())


def row_files(row: str) -> set[Path]:
    return {path.relative_to(ROOT) for path in files_of(change_map()[row])}


def holding(node: ast.AST, options: frozenset[str]) -> str | None:
    """The name of a class with every start option as a field (StartOptions, RunRequest,
    the run's state), or of a function taking more than half of them by name (`--policy`
    read into `policy_file` counts as `policy`); None for anything else."""
    if isinstance(node, ast.ClassDef):
        fields = {
            item.target.id
            for item in node.body
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
        }
        return node.name if fields >= options else None
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        args = {a.arg.removesuffix("_file") for a in [*node.args.args, *node.args.kwonlyargs]}
        return node.name if 2 * len(args & options) > len(options) else None
    return None


def holders_and_takers(
    modules: list[tuple[Path, ast.Module]], options: frozenset[str]
) -> tuple[set[str], set[str]]:
    """The names of the classes, and of the functions, that hold the start options."""
    holders: set[str] = set()
    takers: set[str] = set()
    for _, tree in modules:
        for node in ast.walk(tree):
            if (name := holding(node, options)) is not None:
                (holders if isinstance(node, ast.ClassDef) else takers).add(name)
    return holders, takers


def names_start_options(
    tree: ast.Module, options: frozenset[str], holders: set[str], takers: set[str]
) -> list[str]:
    """Where a module names the start options one by one, so a new option must be added
    there too: a class or function that holds them (`holding`), a table keyed by every
    option, a tuple or list reading more than half of them, and a call naming two or more
    to a holder or a taker (a request built, a state started, flags read)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if (name := holding(node, options)) is not None:
            found.append(name)
        elif isinstance(node, ast.Dict):
            if {k.value for k in node.keys if isinstance(k, ast.Constant)} >= options:
                found.append(f"a table at line {node.lineno}")
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            read = {e.attr for e in node.elts if isinstance(e, ast.Attribute)}
            # ... or names them (a record's OWNS: the fields it writes)
            read |= {str(e.value) for e in node.elts if isinstance(e, ast.Constant)}
            if 2 * len(read & options) > len(options):
                found.append(f"a tuple at line {node.lineno}")
        elif isinstance(node, ast.Call):
            callee = ast.unparse(node.func).rsplit(".", 1)[-1]
            named = {k.arg for k in node.keywords} & options
            if len(named) >= 2 and callee in holders | takers:
                found.append(f"{callee}(...) at line {node.lineno}")
    # Read-only properties named after the options, across the module's classes (the
    # records' views: a part reads an option through the view of its record).
    properties = {
        item.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.FunctionDef)
        and any(ast.unparse(d) == "property" for d in item.decorator_list)
    }
    if properties >= options:
        found.append("a property for every option")
    for node in ast.walk(tree):  # a holder's own constructor: `cls(...)` in its methods
        if isinstance(node, ast.ClassDef) and node.name in holders:
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.Call)
                    and isinstance(inner.func, ast.Name)
                    and inner.func.id == "cls"
                    and len({k.arg for k in inner.keywords} & options) >= 2
                ):
                    found.append(f"{node.name}: cls(...) at line {inner.lineno}")
    return found


def test_a_start_option_reaches_every_file_that_names_the_options():
    """Every module that names the start options one by one is in the row: an option added
    to StartOptions is added there, or the module is left behind."""
    options = frozenset(StartOptions.model_fields)
    modules = list(package_modules())
    holders, takers = holders_and_takers(modules, options)
    assert {"StartOptions", "StartFields", "RunRequest", "StateFields"} <= holders, holders
    naming = {path for path, tree in modules if names_start_options(tree, options, holders, takers)}
    missing = naming - row_files("add a start option")
    assert not missing, f"these name every start option but are not in the row: {missing}"


def test_every_start_option_is_a_flag():
    assert set(START_FLAGS) == set(StartOptions.model_fields)


def decision_inputs() -> set[str]:
    """The inputs a person decides what a run asks with: each has a check of its own in
    workflows/signed_changes.py, over the state and that input (every other change goes
    through `change_error`)."""
    found = set()
    for name, function in inspect.getmembers(signed_changes, inspect.isfunction):
        if function.__module__ != signed_changes.__name__ or name.startswith("_"):
            continue
        second = list(inspect.signature(function).parameters)[1:2]
        kind = typing.get_type_hints(function).get(second[0]) if second else None
        if isinstance(kind, type) and kind.__module__ == people_inputs.__name__:
            found.add(kind.__name__)
    return found - {SignedDecision.__name__}


def kind_tellers() -> set[str]:
    """What tells an approval request's kinds apart: the kind itself, and each kind's
    predicate on the request (`is_budget`)."""
    predicates = {f"is_{kind.value}" for kind in RequestKind}
    return {RequestKind.__name__} | {p for p in predicates if hasattr(ApprovalRequest, p)}


def names_in(tree: ast.Module) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name.rsplit(".", 1)[-1])
    return found


def test_a_kind_of_person_decision_reaches_every_file_that_tells_the_kinds_apart():
    """Every module that handles two or more of the decision inputs side by side, or tells
    the kinds of approval request apart, is in the row: a new kind is handled there too
    (or knowingly goes as the others do). The console's templates are read as text."""
    inputs, tellers = decision_inputs(), kind_tellers()
    assert {"DecideRequest", "Answer", BudgetRaise.__name__} <= inputs, inputs
    assert {"RequestKind", "is_budget"} <= tellers, tellers
    telling = set()
    for path, tree in package_modules():
        names = names_in(tree)
        if len(names & inputs) >= 2 or names & tellers:
            telling.add(path)
    for path in (ROOT / "console" / "templates").glob("*.html"):
        if any(re.search(rf"\b{name}\b", path.read_text()) for name in tellers):
            telling.add(path.relative_to(ROOT))
    assert Path("workflows/people_inputs.py") in telling
    assert Path("workflows/records.py") in telling
    missing = telling - row_files("add a kind of person decision")
    assert not missing, f"these tell the kinds of decision apart but are not in the row: {missing}"


def test_a_field_of_the_state_is_added_in_the_two_files_its_row_names():
    """The row's two files are where a field is said: `StateFields` declares every field
    (RunState and the records declare none), one record's OWNS names it, and no other
    module of the package that reads the state lists its fields by hand (a literal naming
    five or more of them would be a third place to keep equal; a request's own fields of
    the same names are the request's)."""
    from durable_agents.workflows.state import RunState
    from durable_agents.workflows.state.fields import StateFields
    from durable_agents.workflows.state.run_state import RECORDS

    files = row_files("add a field to the state")
    assert files == {Path("workflows/state/fields.py")}, files  # and "its record's file"
    assert list(RunState.model_fields) == list(StateFields.model_fields)
    fields = set(StateFields.model_fields)
    record_files = {
        Path("workflows/state", Path(inspect.getfile(record)).name) for record in RECORDS
    }
    for field in fields:
        owners = [record.__name__ for record in RECORDS if field in record.OWNS]
        assert len(owners) == 1, (field, owners)
    for path, tree in package_modules():
        if path == Path("workflows/state/fields.py") or path in record_files:
            continue
        if "workflows.state" not in ast.unparse(tree) and path.parts[:2] != ("workflows", "state"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                named = {
                    element.value
                    for element in node.elts
                    if isinstance(element, ast.Constant) and element.value in fields
                }
                assert len(named) < 5, f"{path}:{node.lineno} lists the state's fields"
