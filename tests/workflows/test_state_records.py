"""The run's state is made of records, each the only writer of its fields.

Every table here comes from the code's own lists: the fields from `RunState.model_fields`,
the records from `run_state.RECORDS`, the code from every module of the package."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import get_args

import pytest
from pydantic import BaseModel

from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.state import RunState, StateWriteRefused, run_state
from durable_agents.workflows.state.fields import StateFields
from durable_agents.workflows.state.record import Read, Record
from durable_agents.workflows.state.run_state import OWNER_OF, RECORDS

ROOT = Path(__file__).parents[2]
FIELDS = list(RunState.model_fields)
RUN_STATE_FIELDS = list(RunState.model_fields.values())
RECORD_NAMES = {record.__name__: record for record in RECORDS}
# Calls that change a list, dict or model in place.
MUTATORS = {
    "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update",
    "add", "discard", "setdefault", "popitem", "take_tool_approvers",
}  # fmt: skip
# The JSON every recorded history's state holds, field by field in order: a change here
# is a change of what continue-as-new carries and queries answer (tests/histories). A new
# field goes after these, with a default: this list is what was recorded, not all there is.
RECORDED_FIELDS = (
    "run_id", "identity", "goal", "label", "agent", "policy", "limits", "status", "plan",
    "current_step", "context", "results", "results_total", "approvals", "questions",
    "pause_requested", "cancel_requested_by", "audit", "usage", "errors", "final_answer",
    "output", "effects", "next_seq", "outbox", "transcript_rows", "store_queue",
    "notes_for_model", "moment", "events", "phase_start_seq", "parent", "chain", "budget",
    "tool_calls", "last_call", "delegations", "delegated_by", "signature_version",
    "signed_nonces", "people_checks", "revoked_keys", "conversation", "subject",
    "subject_grant", "memory_namespace", "shadow", "created_at", "updated_at",
)  # fmt: skip


def new_state() -> RunState:
    return RunState.start("run-1", RunRequest(goal="g"), datetime.now(UTC))


def test_the_states_fields_begin_with_the_ones_recorded_histories_hold():
    assert tuple(FIELDS[: len(RECORDED_FIELDS)]) == RECORDED_FIELDS
    for name in FIELDS[len(RECORDED_FIELDS) :]:
        assert not RunState.model_fields[name].is_required(), f"{name} needs a default"


def test_every_field_belongs_to_exactly_one_record():
    owned = [field for record in RECORDS for field in record.OWNS]
    assert sorted(owned) == sorted(FIELDS), set(owned) ^ set(FIELDS)
    assert len(owned) == len(set(owned)), "a field owned by two records"


def test_the_state_and_its_records_are_one_level_deep():
    """RunState is its fields (a plain model) with its records; each record is a Record
    (what it owns, and the one way it writes): no tower of types above them."""
    assert RunState.__bases__ == (StateFields,) and StateFields.__bases__ == (BaseModel,)
    for record in RECORDS:
        assert record.__bases__ == (Record,) and Record.__bases__ == (object,), record


@pytest.mark.parametrize("field", FIELDS)
def test_every_field_refuses_a_direct_write_and_the_state_is_unchanged(field):
    state = new_state()
    before = state.model_dump_json()
    with pytest.raises(StateWriteRefused, match=f"{field} is written by its record, "):
        setattr(state, field, getattr(state, field))
    assert state.model_dump_json() == before


def _models_in(annotation: object) -> set[type[BaseModel]]:
    """The pydantic models an annotation holds, and the models those hold, all the way down."""
    found: set[type[BaseModel]] = set()
    todo = [annotation]
    while todo:
        one = todo.pop()
        todo += list(get_args(one))
        if isinstance(one, type) and issubclass(one, BaseModel) and one not in found:
            found.add(one)
            todo += [field.annotation for field in one.model_fields.values()]
    return found


def _item_fields() -> dict[str, str]:
    """Each model the state holds (a step, a request, a turn, ...) by class name, with a
    field of the one record it belongs to; a model two records hold is left out."""
    owners: dict[str, set[str]] = {}
    for name, field in RunState.model_fields.items():
        for model in _models_in(field.annotation):
            owners.setdefault(model.__name__, set()).add(name)
    return {
        model: sorted(fields)[0]
        for model, fields in owners.items()
        if len({OWNER_OF[f] for f in fields}) == 1
    }


ITEM_FIELD = _item_fields()


def _getters() -> dict[str, str]:
    """The records' members (and the state's) that hand out something a field holds, by
    their return type: what they return is that field's record's to change."""
    getters: dict[str, str] = {}
    for cls in (*RECORDS, RunState):
        for name, member in vars(cls).items():
            function = member.fget if isinstance(member, property) else member
            returns = getattr(function, "__annotations__", {}).get("return", "")
            for model in re.findall(r"\w+", str(returns)):
                if model in ITEM_FIELD and not name.startswith("_"):
                    getters[name] = ITEM_FIELD[model]
    return getters


GETTERS = _getters()


def _mutating_methods() -> set[str]:
    """The methods of the models the state holds that change their own model (`self.x =
    ...`, `self.used.append(...)`, or another such method on self): calling one through a
    field (`state.shadow.take_decision(...)`) is a write to that field."""
    held = {model for field in RUN_STATE_FIELDS for model in _models_in(field.annotation)}
    bodies = {
        name: ast.parse(textwrap.dedent(inspect.getsource(function)))
        for model in held
        for name, function in vars(model).items()
        if inspect.isfunction(function) and not name.startswith("__")
    }
    found: set[str] = set()
    while True:
        more = {name for name, tree in bodies.items() if _changes_self(tree, MUTATORS | found)}
        if more <= found:
            return found
        found |= more


def _changes_self(tree: ast.AST, mutators: set[str]) -> bool:
    def on_self(node: ast.expr) -> bool:
        while isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        return isinstance(node, ast.Name) and node.id == "self"

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Attribute | ast.Subscript) and on_self(t) for t in targets):
                return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in mutators
            and on_self(node.func.value)
        ):
            return True
    return False


MUTATORS |= _mutating_methods()


def package_sources() -> list[Path]:
    """Every module of ours in the repository: its top-level folders and files, less the
    tests, the `durable_agents` links to those same folders, hidden folders (`.venv`,
    `.venv-lowest`, `.data`) and any virtual environment, which hold other people's code."""
    skipped = {"tests", "build", "durable_agents"}
    tops = [
        top
        for top in sorted(ROOT.iterdir())
        if top.name not in skipped
        and not top.name.startswith(".")
        and not (top / "pyvenv.cfg").exists()
    ]
    return [
        path
        for top in tops
        for path in ([top] if top.is_file() else sorted(top.rglob("*.py")))
        if path.suffix == ".py"
    ]


class Writes(ast.NodeVisitor):
    """What a module writes of the state, and from which class: `self._set(field=...)`
    calls, and in-place changes reached through a field (`x.plan.append`, `x.usage.a = 1`,
    `x.plan[0] = s`, `x.tool_calls += 1`)."""

    def __init__(self, where: str, getters: dict[str, str] | None = None) -> None:
        self.where = where
        # The module's own functions that hand out something a field holds, by their
        # return type (`def _shadow(self) -> ShadowSpec`): what they return is the field's.
        self.getters = getters or {}
        self.classes: list[str] = []
        self.found: list[tuple[str, str, str]] = []  # (class or "", field, where)
        # Names bound, in the function being read, to what a field holds (`convo =
        # state.conversation`, `for step in state.plan`): a write through one is the field's.
        self.aliases: dict[str, str] = {}

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, self.aliases = self.aliases, {}
        for arg in [*node.args.args, *node.args.kwonlyargs]:
            # A parameter typed as something the state holds (`request: ApprovalRequest`).
            typed = ast.unparse(arg.annotation) if arg.annotation is not None else ""
            models = [m for m in re.findall(r"\w+", typed) if m in ITEM_FIELD]
            if models:
                self.aliases[arg.arg] = ITEM_FIELD[models[0]]
        self.generic_visit(node)
        self.aliases = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._bind(node.target, node.iter)
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        if not isinstance(target, ast.Name):
            return
        field = self._field_of(value)
        if field is not None:
            self.aliases[target.id] = field
        else:
            self.aliases.pop(target.id, None)

    def _field_of(self, value: ast.expr) -> str | None:
        """The field an expression reaches into, if any (`x.plan`, `x.plan[0]`, an alias,
        what a record hands out: `x.requests.pending_approvals[0]`, `x.steps.next_step()`)."""
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            return GETTERS.get(value.func.attr) or self.getters.get(value.func.attr)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            return self.getters.get(value.func.id)
        while isinstance(value, (ast.Attribute, ast.Subscript)):
            if isinstance(value, ast.Attribute) and value.attr in GETTERS:
                return GETTERS[value.attr]
            if isinstance(value, ast.Attribute) and value.attr in OWNER_OF:
                return value.attr
            value = value.value
        return self.aliases.get(value.id) if isinstance(value, ast.Name) else None

    def _note(self, field: str, node: ast.AST) -> None:
        owner = self.classes[0] if self.classes else ""
        self.found.append((owner, field, f"{self.where}:{getattr(node, 'lineno', '?')}"))

    def _through_field(self, target: ast.expr, node: ast.AST) -> None:
        """A write into something a field holds: `<x>.<field>.<...>`, `<x>.<field>[...]`,
        or the same through an alias."""
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            field = self._field_of(target.value)
            if field is not None:
                self._note(field, node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            for one in target.elts if isinstance(target, ast.Tuple) else [target]:
                self._through_field(one, node)
        if len(node.targets) == 1:
            self._bind(node.targets[0], node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        target = node.target
        if isinstance(target, ast.Attribute) and target.attr in OWNER_OF:
            self._note(target.attr, node)
        self._through_field(target, node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "_set":
            for keyword in node.keywords:
                self._note(keyword.arg or "**", node)
        if isinstance(func, ast.Attribute) and func.attr == "__setattr__" and self._bypass(node):
            self._note("__setattr__", node)
        through = func.value if isinstance(func, ast.Attribute) else None
        mutates = isinstance(func, ast.Attribute) and func.attr in MUTATORS
        field = self._field_of(through) if mutates and through is not None else None
        if field is not None:
            self._note(field, node)
        self.generic_visit(node)

    @staticmethod
    def _bypass(node: ast.Call) -> bool:
        """`BaseModel.__setattr__(x, ...)`, or `object.__setattr__(x, ...)` on another
        object than the caller's own (a frozen class of ours sets its own fields so)."""
        assert isinstance(node.func, ast.Attribute)
        receiver, args = node.func.value, node.args
        if isinstance(receiver, ast.Name) and receiver.id == "BaseModel":
            return True
        on_self = bool(args) and isinstance(args[0], ast.Name) and args[0].id == "self"
        return isinstance(receiver, ast.Name) and receiver.id == "object" and not on_self


def writes_of(source: str, where: str) -> list[tuple[str, str, str]]:
    tree = ast.parse(source)
    getters = {
        node.name: ITEM_FIELD[models[0]]
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None
        for models in [
            [m for m in re.findall(r"\w+", ast.unparse(node.returns)) if m in ITEM_FIELD]
        ]
        if models
    }
    visitor = Writes(where, getters)
    visitor.visit(tree)
    return visitor.found


def misplaced(found: list[tuple[str, str, str]]) -> list[str]:
    """The writes not made by the field's own record."""
    return [
        f"{where}: {field} written from {owner or 'module level'}"
        for owner, field, where in found
        if field != "__setattr__" and OWNER_OF.get(field) != owner
    ]


def test_no_code_writes_a_field_of_the_state_outside_its_record():
    found = []
    for path in package_sources():
        found += writes_of(path.read_text(), str(path.relative_to(ROOT)))
    assert misplaced(found) == []
    # What could get past the state's refusal is used where the refusal lives, only.
    bypasses = [where for owner, field, where in found if field == "__setattr__"]
    assert [where.split(":")[0] for where in bypasses] == ["workflows/state/record.py"]


@pytest.mark.parametrize(
    "line",
    [
        "self.state.plan.append(step)",
        "self.state.usage.input_tokens = 3",
        "state.approvals[0] = request",
        "self.state.tool_calls += 1",
        "self._set(status=RunStatus.RUNNING)",
        "self.state.policy.take_tool_approvers({})",
        "BaseModel.__setattr__(state, 'status', RunStatus.RUNNING)",
        "object.__setattr__(self.state, 'status', RunStatus.RUNNING)",
        "convo = state.conversation; convo.queue.pop(0)",
        "for step in state.plan: step.turns += 1",
        "request = self.state.approvals[-1]; request.status = ApprovalStatus.APPROVED",
        "found = self.state.budget_book.delegation(child); found.spend_reported = False",
        "waiting = self.state.pending_approvals[0]; waiting.comment = 'ok'",
        "state.shadow.take_decision('pay_invoice', {})",
    ],
)
def test_the_search_finds_each_kind_of_write_from_a_part(line):
    body = line.replace("; ", "\n        ").replace(": step", ":\n            step")
    source = f"class Story:\n    def go(self, state, step, request, child):\n        {body}\n"
    found = writes_of(source, "workflows/phases/story.py")
    assert len(misplaced(found) + [w for _, field, w in found if field == "__setattr__"]) == 1


@pytest.mark.parametrize("parameter", ["step: PlanStep", "request: ApprovalRequest | None"])
def test_the_search_follows_a_parameter_typed_as_something_the_state_holds(parameter):
    name = parameter.split(":")[0]
    source = f"class Gate:\n    def go(self, {parameter}):\n        {name}.status = 'x'\n"
    assert len(misplaced(writes_of(source, "workflows/phases/gate.py"))) == 1


def test_what_the_state_holds_is_known_by_its_record():
    assert {"PlanStep": "Steps", "ApprovalRequest": "PeopleRequests", "Delegation": "BudgetBook",
            "TurnRecord": "Thread", "RunEvent": "Moments"}.items() <= {
        model: OWNER_OF[field] for model, field in ITEM_FIELD.items()}.items()  # fmt: skip
    assert {"next_step", "pending_approvals", "delegation", "find_pending_question"} <= set(GETTERS)


def test_the_records_own_modules_are_searched():
    searched = {str(path.relative_to(ROOT)) for path in package_sources()}
    for record in RECORDS:
        module = inspect.getsourcefile(record)
        assert module is not None
        assert str(Path(module).resolve().relative_to(ROOT.resolve())) in searched
    assert "workflows/phases/story.py" in searched and run_state.__name__


def test_the_search_follows_what_a_modules_own_function_hands_out():
    """A what-if's recording taken through a part's own getter (`shadow = self._shadow();
    shadow.take_answer(q)`) is a write to `shadow`, which only Origin makes."""
    source = (
        "class RecordedDecisions:\n"
        "    def _shadow(self) -> ShadowSpec | None:\n        return self.state.shadow\n"
        "    def go(self, q):\n        shadow = self._shadow()\n        shadow.take_answer(q)\n"
    )
    assert misplaced(writes_of(source, "workflows/phases/deciding.py")) == [
        "workflows/phases/deciding.py:6: shadow written from RecordedDecisions"
    ]
    assert {"take_decision", "take_answer", "take_delegation"} <= MUTATORS


def test_what_a_record_hands_out_to_read_is_typed_as_its_field():
    """`goal = Read[str]()`: the type said there is the field's own (mypy trusts it)."""
    reads = [(r, n, m) for r in RECORDS for n, m in vars(r).items() if isinstance(m, Read)]
    assert reads
    for record, name, read in reads:
        said = get_args(vars(read)["__orig_class__"])[0]
        assert said == StateFields.model_fields[name].annotation, (record.__name__, name)
    terms = new_state().terms
    with pytest.raises(StateWriteRefused, match="goal is written by a transition"):
        terms.goal = "other"
