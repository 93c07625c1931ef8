"""The run's parts (workflows/phases): each is built from the run context and the parts it
is handed, reaches nothing else, and can be run alone in a workflow of a test's own."""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import pkgutil
import textwrap
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, get_origin, get_type_hints

import pytest
from pydantic import BaseModel
from temporalio import workflow
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

import durable_agents.workflows as workflows_package
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RunBudget, RunRequest
from durable_agents.workflows.people_inputs import DecideRequest
from durable_agents.workflows.phases import (
    beginnings,
    budget,
    context,
    conversation,
    deciding,
    delegating,
    gate,
    model_turn,
    people,
    story,
    tool_calls,
    turn_loop,
)
from durable_agents.workflows.phases.beginnings import Beginnings
from durable_agents.workflows.phases.budget import Budget
from durable_agents.workflows.phases.context import Phase, RunContext, RunStopped, StateShare
from durable_agents.workflows.phases.conversation import Conversation
from durable_agents.workflows.phases.deciding import RecordedDecisions, WaitingForPeople
from durable_agents.workflows.phases.delegating import Delegating
from durable_agents.workflows.phases.gate import Gate
from durable_agents.workflows.phases.model_turn import ModelTurns
from durable_agents.workflows.phases.people import PeopleActions
from durable_agents.workflows.phases.story import Story
from durable_agents.workflows.phases.tool_calls import ToolCalls
from durable_agents.workflows.phases.turn_loop import TurnLoop
from durable_agents.workflows.records import BUDGET_REQUEST
from durable_agents.workflows.start_options import StartOptions
from durable_agents.workflows.state import RunState
from durable_agents.workflows.state_fields import RECORDS
from durable_agents.workflows.state_views import VIEWS, names_of, records_of
from durable_agents.workflows.whatif import WHATIF_ACTOR
from tests.conftest import arrange, eventually

ROOT = Path(__file__).parents[2]
PHASES: dict[type[Phase[Any]], ModuleType] = {
    Budget: budget, ModelTurns: model_turn, Gate: gate, Delegating: delegating,
    ToolCalls: tool_calls, Story: story, Conversation: conversation,
    Beginnings: beginnings, PeopleActions: people,
    WaitingForPeople: deciding, RecordedDecisions: deciding, TurnLoop: turn_loop,
}  # fmt: skip


def fresh_context(**request: object) -> RunContext:
    state = RunState.start("run-1", RunRequest(goal="g", **request), datetime.now(UTC))
    return RunContext(state)


def test_each_phase_is_built_alone_from_the_context_and_the_parts_it_uses():
    ctx = fresh_context()
    people = WaitingForPeople(ctx)
    spend = Budget(ctx, people)
    turns = ModelTurns(ctx, spend)
    tools = ToolCalls(ctx, spend, Gate(ctx, people), Delegating(ctx))
    loop = TurnLoop(ctx, turns, tools)
    told = Story(ctx, loop)
    built: list[Phase[Any]] = [
        spend, turns, Gate(ctx, RecordedDecisions(ctx)), Delegating(ctx), tools, loop, told,
        Conversation(ctx, loop, told), Beginnings(ctx), PeopleActions(ctx), people,
        RecordedDecisions(ctx),
    ]  # fmt: skip
    assert {type(phase) for phase in built} == set(PHASES)
    assert all(phase.ctx is ctx for phase in built)
    # A fork's start replaces the state in the context: every part reads the new one.
    ctx.begin_as(RunState.start("run-2", RunRequest(goal="other"), datetime.now(UTC)))
    for phase in built:
        fields = names_of(phase.VIEW) & set(RunState.model_fields)
        assert fields, type(phase).__name__
        for name in fields:
            assert getattr(phase.state, name) == getattr(ctx.whole_state, name), name
        assert all(getattr(phase.state, name).__class__.__name__ in RECORD_NAMES
                   for name in phase.RECORDS)  # fmt: skip


def test_each_part_is_handed_only_its_view_of_the_state():
    """At run time as in mypy: every name of the state a part's view does not hold is
    refused (each field, record and reading of RunState, for every part), and the share
    takes no write at all."""
    ctx = fresh_context()
    everything = {
        name for name in dir(RunState) if not name.startswith("_") and name not in dir(BaseModel)
    } | set(RunState.model_fields)
    for cls in PHASES:
        phase = _built(cls, ctx)
        held = names_of(cls.VIEW)
        assert held < everything, cls.__name__
        for name in sorted(everything - held):
            with pytest.raises(AttributeError, match="is not handed"):
                getattr(phase.state, name)
        for name in sorted(held & set(RunState.model_fields)):
            with pytest.raises(AttributeError):
                setattr(phase.state, name, None)
        assert records_of(cls.VIEW) == phase.RECORDS and phase.RECORDS <= RECORD_ACCESSORS


def _built(cls: type, ctx: RunContext) -> Any:
    """A part, built from the context and stand-ins for the parts it is handed."""
    handed = list(inspect.signature(cls).parameters)[1:]
    return cls(ctx, *[object() for _ in handed])


# The ways to the state whole: the context's own (`_state`, `whole_state`), a share's
# insides (`_ctx`, ...), and a record's state (`_s`, in every record of RECORDS).
PAST_THE_VIEW = {"whole_state", "_state", *StateShare.__slots__, "_share"} | {
    name
    for record in RECORDS
    for name in vars(record(RunState.start("r", RunRequest(goal="g"), datetime.now(UTC))))  # type: ignore[call-arg]
}


RECORD_INSIDES = PAST_THE_VIEW - {"whole_state", "_state", *StateShare.__slots__, "_share"}


def test_no_part_reaches_the_state_whole():
    """The context holds the state whole; the workflow alone reads it whole (its queries
    and updates). A part reaching past its share (the context's state, the share's
    insides, a record's state: `self.state.requests._s`) would read and write past its
    view, so no module of the parts does; and nothing of the package outside the state's
    own modules reaches a record's state."""
    for module in {*PHASES.values()}:
        reached = {
            node.attr
            for node in ast.walk(ast.parse(inspect.getsource(module)))
            if isinstance(node, ast.Attribute) and node.attr in PAST_THE_VIEW
        }
        assert reached == set(), module.__name__
    state_modules = {Path(inspect.getfile(record)).name for record in RECORDS}
    for path in sorted((ROOT / "workflows").rglob("*.py")):
        if path.name in state_modules or path.name == "context.py":
            continue
        tree = ast.parse(path.read_text())
        held = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} & RECORD_INSIDES
        assert held == set(), path
    assert {"_s"} == RECORD_INSIDES


def test_a_share_refuses_every_write_and_copy():
    """Python cannot hide the share's own slots from a read (`share._ctx`): the search above
    is what keeps every part's code off them. Any other private name is refused."""
    ctx = fresh_context()
    share: Any = Budget(ctx, WaitingForPeople(ctx)).state
    for name in [*StateShare.__slots__, "budget_book", "anything"]:
        with pytest.raises(AttributeError, match="may not set"):
            setattr(share, name, None)
    with pytest.raises(TypeError, match="live view"):
        copy.copy(share)
    with pytest.raises(TypeError, match="live view"):
        copy.deepcopy(share)
    with pytest.raises(AttributeError, match="is not handed"):
        share._state  # noqa: B018 - the read is the test


def _reaches(cls: type) -> set[str]:
    """The attributes of `self` a class's own code reads that it neither defines nor was
    handed: what it would reach past its context and its parts."""
    tree = ast.parse(inspect.getsource(cls))
    own = {name for name, _ in inspect.getmembers(cls)} | {"ctx", "state"}
    handed = set(inspect.signature(cls).parameters)
    assigned: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Name):
            continue
        if node.value.id == "self":
            (assigned if isinstance(node.ctx, ast.Store) else read).add(node.attr)
    return read - own - handed - assigned


def test_no_phase_reaches_state_it_was_not_handed():
    for cls in PHASES:
        assert issubclass(cls, Phase) and cls.__bases__ == (Phase,), cls
        assert get_origin(cls.__orig_bases__[0]) is Phase, cls  # type: ignore[attr-defined]
        assert _reaches(cls) == set(), cls.__name__
    # The context owns its attributes explicitly: all set in its constructor.
    made = vars(fresh_context())
    assert set(made) == {
        "_state", "_published", "signatures_settled", "_step_with_status", "_opened_in_one",
        "active_child", "_sending", "_identity_named",
    }  # fmt: skip


def test_the_workflow_class_has_no_base_class_of_ours():
    assert AgentWorkflow.__bases__ == (object,)
    assert not any(cls.__module__.startswith("durable_agents") for cls in AgentWorkflow.__mro__[1:])


def test_the_phases_modules_import_no_other_phase_class_as_a_base():
    for module in {*PHASES.values(), context}:
        tree = ast.parse(inspect.getsource(module))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(base) for base in node.bases}
                views = {view.__name__ for view in VIEWS.values()}
                allowed = {"Phase", "Generic[ViewT]", "Exception", "Protocol", *views}
                bases = {b for b in bases if not (b.startswith("Phase[") and b.endswith("State]"))}
                assert bases <= allowed, (module.__name__, node.name)


@workflow.defn(sandboxed=False)
class BudgetAlone:
    """The budget part alone: a run with one tool call made, under a budget of `limit`;
    people decide, or (`whatif`) a what-if's recorded decisions, which raise no budget."""

    @workflow.init
    def __init__(self, limit: int, whatif: bool) -> None:
        request = RunRequest(goal="probe", budget=RunBudget(tool_calls=limit))
        self.ctx = RunContext(RunState.start(workflow.info().workflow_id, request, workflow.now()))
        arrange(self.ctx.whole_state, tool_calls=1)  # one call made
        people = RecordedDecisions(self.ctx) if whatif else WaitingForPeople(self.ctx)
        self.budget = Budget(self.ctx, people)

    @workflow.run
    async def run(self, limit: int, whatif: bool) -> str:
        try:
            await self.budget.within("tool")
        except RunStopped as stopped:
            asked = [a.status.value for a in self.ctx.whole_state.approvals]
            cancel = self.ctx.whole_state.cancel_requested_by
            return f"stopped by {stopped.actor.by}, cancel by {cancel}, after {asked}"
        return "within"

    @workflow.query
    def asked(self) -> list[str]:
        return [request.tool for request in self.ctx.whole_state.pending_approvals]

    @workflow.signal
    def decide(self, approve: bool) -> None:
        [request] = self.ctx.whole_state.pending_approvals
        decision = DecideRequest(approve=approve, request_id=request.request_id, by="alice")
        self.ctx.whole_state.requests.apply_decision(decision, workflow.now())


async def test_the_budget_part_runs_alone_in_a_workflow_of_its_own(time_env):
    queue = f"budget-alone-{uuid.uuid4().hex[:6]}"
    async with Worker(
        time_env.client,
        task_queue=queue,
        workflows=[BudgetAlone],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        within = await time_env.client.execute_workflow(
            BudgetAlone.run, args=[5, False], id=f"{queue}-0", task_queue=queue
        )
        handle = await time_env.client.start_workflow(
            BudgetAlone.run, args=[1, False], id=f"{queue}-1", task_queue=queue
        )
        asked = await eventually(lambda: handle.query(BudgetAlone.asked))
        await handle.signal(BudgetAlone.decide, False)
        stopped = await handle.result()
        # A what-if stops at its spent budget: it approves itself no more (else it loops).
        whatif = await time_env.client.execute_workflow(
            BudgetAlone.run,
            args=[1, True],
            id=f"{queue}-2",
            task_queue=queue,
            execution_timeout=timedelta(minutes=1),
        )
    assert within == "within"
    assert asked == [BUDGET_REQUEST]
    assert stopped == "stopped by alice, cancel by alice, after ['rejected']"
    assert whatif == f"stopped by {WHATIF_ACTOR}, cancel by {WHATIF_ACTOR}, after ['rejected']"


# The state's records as the state hands them out (`state.requests`, ...), from its own
# properties typed by a record class.
RECORD_ACCESSORS = {
    name
    for name, member in vars(RunState).items()
    if isinstance(member, property)
    and member.fget is not None
    and member.fget.__annotations__.get("return") in {r.__name__ for r in RECORDS}
}


def _records_used(cls: type) -> set[str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in RECORD_ACCESSORS
    }


RECORD_NAMES = {record.__name__ for record in RECORDS}
# Each name a view answers, by the record that holds it (`policy`: terms, ...).
HOLDER_OF = {
    name: accessor
    for view in VIEWS.values()
    for accessor in records_of(view)
    for name in names_of(view)
}


def _view_used(cls: type) -> set[str]:
    """The records a part's own code uses: each name it reads of its share
    (`self.state.x`), and the view of every function it hands its share to whole
    (`signed_changes.change_error(self.state, ...)` takes a SigningState)."""

    def is_share(node: ast.expr) -> bool:
        return ast.unparse(node) == "self.state"

    return _records_read(cls, is_share)


def _records_read(code: Any, is_share: Callable[[ast.expr], bool]) -> set[str]:
    """The records `code` (a class or a function) uses of the state it holds (`is_share`):
    the names it reads of it, and the views of the functions it hands it to whole."""
    module = inspect.getmodule(code)
    tree = ast.parse(textwrap.dedent(inspect.getsource(code)))
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_share(node.value):
            used.add(HOLDER_OF[node.attr])
        if not isinstance(node, ast.Call):
            continue
        handed = [
            *(str(i) for i, arg in enumerate(node.args) if is_share(arg)),
            *(kw.arg for kw in node.keywords if kw.arg is not None and is_share(kw.value)),
        ]
        for where in handed:
            function = eval(ast.unparse(node.func), vars(module))
            parameters = list(inspect.signature(function).parameters)
            parameter = parameters[int(where)] if where.isdigit() else where
            view = get_type_hints(function)[parameter]
            if view is object:  # it reads by name: the names it reads are its table's
                used |= {HOLDER_OF[name] for name in READ_BY_NAME[function]}
            else:
                used |= records_of(view)
    return used


def _view_typed_functions() -> list[tuple[Callable[..., Any], str]]:
    """Every function of the workflows package with a parameter typed by record views
    (`state: SigningState`), and that parameter's name."""
    found: list[tuple[Callable[..., Any], str]] = []
    for info in pkgutil.walk_packages(workflows_package.__path__, "durable_agents.workflows."):
        module = importlib.import_module(info.name)
        for function in vars(module).values():
            if not inspect.isfunction(function) or function.__module__ != module.__name__:
                continue
            for parameter, written in function.__annotations__.items():
                try:  # a name imported only for type checking is no view (views import)
                    hint = eval(written, vars(module)) if isinstance(written, str) else written
                except NameError:
                    continue
                if isinstance(hint, type) and set(hint.__mro__) & set(VIEWS.values()):
                    found.append((function, parameter))
    return found


def _is_named(name: str, node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def test_each_function_is_typed_by_exactly_the_records_it_reads():
    """A function a part hands its share to is typed by the views of the records it reads,
    no more: what it is typed by is what the part is handed for it."""
    typed = _view_typed_functions()
    assert {f.__name__ for f, _ in typed} >= {"change_error", "decision_error", "refusal"}
    for function, parameter in typed:
        view = eval(function.__annotations__[parameter], vars(inspect.getmodule(function)))
        read = _records_read(function, partial(_is_named, parameter))
        assert read == set(records_of(view)), f"{function.__module__}.{function.__name__}"


# The functions that read any object by name, and the names each reads.
READ_BY_NAME = {StartOptions.fields_of: list(StartOptions.model_fields)}


def test_each_part_is_handed_exactly_the_records_it_uses():
    """A part's view names no record its code does not use, and (mypy) its code uses none
    its view does not name."""
    wrong = {cls.__name__: _view_used(cls) ^ cls.RECORDS for cls in PHASES}
    assert {name: diff for name, diff in wrong.items() if diff} == {}


def test_each_part_uses_only_the_records_of_the_state_it_names():
    """The classes that hold the state whole (the workflow, the context) declare the
    records whose transitions they call."""
    assert len(RECORD_ACCESSORS) == len(RECORDS)
    modules = {inspect.getmodule(cls) for cls in [*PHASES, AgentWorkflow, RunContext]}
    classes = [
        cls
        for module in modules
        for cls in vars(module).values()
        if inspect.isclass(cls) and cls.__module__ == getattr(module, "__name__", None)
    ]
    assert set(PHASES) <= set(classes) and RunContext in classes
    for cls in classes:
        if issubclass(cls, Phase):
            continue  # a part's records are its view's (above)
        declared = set(getattr(cls, "RECORDS", frozenset()))
        assert _records_used(cls) == declared, cls.__name__


def _context_users() -> dict[str, set[str]]:
    """Who uses each member of the run context: the classes of the workflows package that
    reach it through a context (`self.ctx.x`, `ctx.x`), and the context itself where one
    of its other members does (`self.x` inside RunContext)."""
    users: dict[str, set[str]] = {}
    root = Path(inspect.getfile(AgentWorkflow)).parent
    for path in sorted(root.rglob("*.py")):
        for cls in [
            n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)
        ]:
            for method in [
                n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            ]:
                for node in ast.walk(method):
                    if not isinstance(node, ast.Attribute):
                        continue
                    owner = node.value
                    through_ctx = (
                        isinstance(owner, ast.Attribute) and owner.attr in ("ctx", "_ctx")
                    ) or (isinstance(owner, ast.Name) and owner.id == "ctx")
                    own_use = (
                        cls.name == "RunContext"
                        and isinstance(owner, ast.Name)
                        and owner.id == "self"
                        and node.attr != method.name
                        and method.name != "__init__"
                    )
                    if through_ctx or own_use:
                        users.setdefault(node.attr, set()).add(cls.name)
    return users


def test_the_run_context_keeps_only_what_more_than_one_part_uses():
    members = {name for name in vars(RunContext) if not name.startswith("_") and name.islower()}
    members |= {name for name in vars(fresh_context()) if not name.startswith("_")}
    users = _context_users()
    alone = {m: sorted(users.get(m, set())) for m in members if len(users.get(m, set())) < 2}
    # What hands out, replaces or packs the state whole is the context's alone to do, for
    # the one part that needs it: no part holds the state whole.
    assert set(alone) <= _whole_state_members()
    assert set(alone) == {"whole_state", "begin_as", "trim_for_a_long_life", "packed_state"}


def _whole_state_members() -> set[str]:
    """The context's members that use its state whole: `self._state` not read through."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(RunContext)))
    found = set()
    for method in [n for n in tree.body[0].body if isinstance(n, ast.FunctionDef)]:  # type: ignore[attr-defined]
        parents = {child: node for node in ast.walk(method) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(method):
            whole = (
                isinstance(node, ast.Attribute)
                and node.attr == "_state"
                and not isinstance(parents.get(node), ast.Attribute)
            )
            if whole and method.name != "__init__":
                found.add(method.name)
    return found


def test_the_map_of_parts_and_records_is_the_codes():
    """docs/architecture.md's table of the records each part uses, read from the code."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("| part | records it uses |") :].split("\n\n")[0]
    rows = {
        cells[0].strip("` "): cells[1].strip()
        for line in table.splitlines()[2:]
        for cells in [line.strip("|").split("|")]
    }
    classes: list[type] = [AgentWorkflow, RunContext, *PHASES]
    assert rows == {cls.__name__: ", ".join(sorted(cls.RECORDS)) for cls in classes}  # type: ignore[attr-defined]
