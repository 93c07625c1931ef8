"""The run's parts (workflows/phases): each is built from the run context, the parts it
uses and the records of the run's state it uses, all handed to its constructor (the
workflow's `_wire` says what each holds, in one place); it reaches nothing else, and can
be run alone in a workflow of a test's own."""

from __future__ import annotations

import ast
import inspect
import textwrap
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

from temporalio import workflow
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.beginnings import start
from durable_agents.workflows.beginnings.start import Start
from durable_agents.workflows.contracts import RunBudget, RunRequest
from durable_agents.workflows.people_inputs import DecideRequest
from durable_agents.workflows.phases import (
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
from durable_agents.workflows.phases.budget import Budget
from durable_agents.workflows.phases.context import Phase, RunContext, RunStopped
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
from durable_agents.workflows.signed_changes import Signing
from durable_agents.workflows.state import RunState
from durable_agents.workflows.state.record import Record
from durable_agents.workflows.whatif import WHATIF_ACTOR
from tests.conftest import arrange, eventually

ROOT = Path(__file__).parents[2]
PHASES: dict[type[Phase], ModuleType] = {
    Budget: budget, ModelTurns: model_turn, Gate: gate, Delegating: delegating,
    ToolCalls: tool_calls, Story: story, Conversation: conversation,
    Start: start, PeopleActions: people,
    WaitingForPeople: deciding, RecordedDecisions: deciding, TurnLoop: turn_loop,
}  # fmt: skip


def fresh_state(**request: object) -> RunState:
    return RunState.start("run-1", RunRequest(goal="g", **request), datetime.now(UTC))


def wired(state: RunState) -> dict[type, Phase]:
    """Every part, as the workflow wires them (AgentWorkflow._wire), over `state`."""
    workflow_class = AgentWorkflow.__new__(AgentWorkflow)
    ctx = RunContext(state)
    workflow_class._wire(ctx, state, None)
    found = [workflow_class._start, workflow_class._budget, workflow_class._story]
    found += [workflow_class._conversation, workflow_class._people]
    loop = workflow_class._conversation.loop
    found += [loop, loop.turns, loop.tools, loop.tools.gate, loop.tools.delegation]
    people = workflow_class._budget.people
    assert isinstance(people, Phase)
    found.append(people)
    return {type(part): part for part in found}


def handed(part: Phase) -> dict[str, Record]:
    """The records a part holds, by the name it holds each under."""
    return {name: value for name, value in vars(part).items() if isinstance(value, Record)}


def test_each_phase_is_built_from_the_context_and_the_records_it_is_handed():
    state, shadowed = fresh_state(), fresh_state()
    parts = wired(state)
    what_if = wired(RunState.model_validate(shadowed.model_dump() | {"shadow": {"of": "r"}}))
    assert set(parts) | set(what_if) == set(PHASES)
    for part in [*parts.values(), what_if[RecordedDecisions]]:
        records = handed(part)
        assert records, type(part).__name__
        # Each record handed is over the run's one state (never a copy of it).
        owner = state if part in parts.values() else None
        assert all(owner is None or r._s is owner for r in records.values())


def _reads(cls: type) -> set[str]:
    """The attributes of `self` a class's own code reads, its `__init__` aside; and those
    the functions of its package read of a parameter typed as the class (the beginnings
    are functions over their part, `Start`: workflows/beginnings/)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    found = {
        node.attr
        for method in ast.walk(tree)
        if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and method.name != "__init__"
        for node in ast.walk(method)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }
    for path in Path(inspect.getfile(cls)).parent.glob("*.py"):
        for function in ast.parse(path.read_text()).body:
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            typed = {
                a.arg
                for a in function.args.args
                if a.annotation is not None and ast.unparse(a.annotation) == cls.__name__
            }
            found |= {
                node.attr
                for node in ast.walk(function)
                if isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in typed
            }
    return found


def test_each_part_uses_every_record_it_is_handed():
    """A part is handed the records it uses, no more: each one it holds, its code reads
    (those of a Signing it checks signatures against aside: the check reads them)."""
    for part in wired(fresh_state()).values():
        signing = getattr(part, "signing", None)
        checked = vars(signing).values() if isinstance(signing, Signing) else ()
        unused = {
            name
            for name, record in handed(part).items()
            if name not in _reads(type(part)) and not any(record is r for r in checked)
        }
        assert unused == set(), type(part).__name__


# What reaches past a part's records: the context's state, a record's state.
PAST_THE_RECORDS = {"whole_state", "_state", "_s", "state"}


def test_no_part_reaches_the_state_whole():
    """The workflow and the context hold the state whole; a part holds records only, and
    nothing of the package outside the state's own folder reaches a record's state."""
    for cls in PHASES:
        reached = {
            node.attr
            for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(cls))))
            if isinstance(node, ast.Attribute) and node.attr in PAST_THE_RECORDS
        }
        assert reached == set(), cls.__name__
    for path in sorted((ROOT / "workflows").rglob("*.py")):
        if path.parent.name == "state":
            continue
        tree = ast.parse(path.read_text())
        held = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} & {"_s"}
        assert held == set(), path


def _reaches(cls: type) -> set[str]:
    """The attributes of `self` a class's own code reads that it neither defines nor was
    handed: what it would reach past its context, its records and its parts."""
    tree = ast.parse(inspect.getsource(cls))
    own = {name for name, _ in inspect.getmembers(cls)} | {"ctx"}
    assigned: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Name):
            continue
        if node.value.id == "self":
            (assigned if isinstance(node.ctx, ast.Store) else read).add(node.attr)
    return read - own - assigned


def test_no_phase_reaches_state_it_was_not_handed():
    for cls in PHASES:
        assert issubclass(cls, Phase) and cls.__bases__ == (Phase,), cls
        assert _reaches(cls) == set(), cls.__name__
    # The context owns its attributes explicitly: all set in its constructor.
    made = vars(RunContext(fresh_state()))
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
                assert bases <= {"Phase", "Exception", "Protocol"}, (module.__name__, node.name)


@workflow.defn(sandboxed=False)
class BudgetAlone:
    """The budget part alone: a run with one tool call made, under a budget of `limit`;
    people decide, or (`whatif`) a what-if's recorded decisions, which raise no budget."""

    @workflow.init
    def __init__(self, limit: int, whatif: bool) -> None:
        request = RunRequest(goal="probe", budget=RunBudget(tool_calls=limit))
        self.state = s = RunState.start(workflow.info().workflow_id, request, workflow.now())
        arrange(s, tool_calls=1)  # one call made
        ctx = RunContext(s)
        people = (
            RecordedDecisions(ctx, origin=s.origin, requests=s.requests)
            if whatif
            else WaitingForPeople(ctx, requests=s.requests, terms=s.terms)
        )
        self.budget = Budget(
            ctx, people, book=s.budget_book, lifecycle=s.lifecycle, moments=s.moments,
            requests=s.requests, steps=s.steps,
        )  # fmt: skip

    @workflow.run
    async def run(self, limit: int, whatif: bool) -> str:
        try:
            await self.budget.within("tool")
        except RunStopped as stopped:
            asked = [a.status.value for a in self.state.approvals]
            cancel = self.state.cancel_requested_by
            return f"stopped by {stopped.actor.by}, cancel by {cancel}, after {asked}"
        return "within"

    @workflow.query
    def asked(self) -> list[str]:
        return [request.tool for request in self.state.pending_approvals]

    @workflow.signal
    def decide(self, approve: bool) -> None:
        [request] = self.state.pending_approvals
        decision = DecideRequest(approve=approve, request_id=request.request_id, by="alice")
        self.state.requests.apply_decision(decision, workflow.now())


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


def _context_users() -> dict[str, set[str]]:
    """Who uses each member of the run context: the classes of the workflows package that
    reach it through a context (`self.ctx.x`, `ctx.x`), and the context itself where one
    of its other members does (`self.x` inside RunContext)."""
    users: dict[str, set[str]] = {}
    root = Path(inspect.getfile(AgentWorkflow)).parent
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        # A module's own functions (the beginnings' checks, over their part) count as
        # one user, named by the module; each class is one.
        owners = [(path.stem, tree.body)]
        owners += [(n.name, n.body) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
        for name, body in owners:
            for method in [
                n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            ]:
                for node in ast.walk(method):
                    if not isinstance(node, ast.Attribute):
                        continue
                    owner = node.value
                    through_ctx = (
                        isinstance(owner, ast.Attribute) and owner.attr in ("ctx", "_ctx")
                    ) or (isinstance(owner, ast.Name) and owner.id == "ctx")
                    own_use = (
                        name == "RunContext"
                        and isinstance(owner, ast.Name)
                        and owner.id == "self"
                        and node.attr != method.name
                        and method.name != "__init__"
                    )
                    if through_ctx or own_use:
                        users.setdefault(node.attr, set()).add(name)
    return users


def test_the_run_context_keeps_only_what_more_than_one_part_uses():
    members = {name for name in vars(RunContext) if not name.startswith("_") and name.islower()}
    members |= {name for name in vars(RunContext(fresh_state())) if not name.startswith("_")}
    users = _context_users()
    alone = {m: sorted(users.get(m, set())) for m in members if len(users.get(m, set())) < 2}
    # What trims or packs the state whole is the context's alone to do, for the one part
    # that needs it: no part holds the state whole.
    assert set(alone) <= _whole_state_members()
    assert set(alone) == {"trim_for_a_long_life", "continued_request"}


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
