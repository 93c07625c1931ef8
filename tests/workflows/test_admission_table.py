"""The admission (workflows/admission.py): its table has a row for every way a run begins
(docs/reference/admission.md prints it, `make docs`), each with the check that admits a
run begun that way (workflows/beginnings/), and `AgentWorkflow.run` is decided by that
check alone: a row's check replaced decides a real run. Walked row by row over what
Temporal's record could say, the checks refuse every carried state but a continuation's
own."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from durable_agents.workflows import admission
from durable_agents.workflows.activity_io import OtherRun, RunOrigin
from durable_agents.workflows.admission import ADMISSION, Beginning
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.beginnings.continued import continuation_refused
from durable_agents.workflows.beginnings.start import Begun, Start
from durable_agents.workflows.contracts import DelegatedBy, ForkSpec, RunRequest
from durable_agents.workflows.packing import MAX_PACKED_STATE_CHARS
from durable_agents.workflows.people_inputs import SignedDecision
from durable_agents.workflows.state import RunState
from durable_agents.workflows.state.origin import Origin
from tests.conftest import arrange

OURS = OtherRun(found=True, workflow_type="AgentWorkflow", task_queue="q", on_this_queue=True)


def test_the_table_has_a_row_with_a_check_for_every_beginning() -> None:
    assert set(ADMISSION) == set(Beginning)
    assert all(rule.trusts and rule.shown_by for rule in ADMISSION.values())
    assert all(callable(rule.admits) for rule in ADMISSION.values())


@dataclass
class Parent:
    workflow_id: str = "parent"
    run_id: str = "p1"


@dataclass
class Info:
    """The fields of workflow.Info the admission reads."""

    workflow_id: str = "victim-r1"
    first_execution_run_id: str = "r1"
    continued_run_id: str | None = None
    attempt: int = 1
    parent: Parent | None = None
    task_queue: str = "q"


def state_of(info: Info, identity: str | None = "victim-r1@r1") -> RunState:
    state = RunState.start(
        info.workflow_id, RunRequest(goal="g"), __import__("datetime").datetime(2026, 1, 1)
    )
    arrange(state, identity=identity)
    return state


ELSEWHERE = OURS.model_copy(update={"on_this_queue": False})
DELEGATED = DelegatedBy(run_id="parent", step=1, tool_call_id="c")
SCHEDULE_GRANT = SignedDecision.model_construct(run="schedule:nightly")  # type: ignore[call-arg]
CARRIES = RunRequest(goal="g", resume_state_packed="eJwDAAAAAAE=")
CONTINUED = Info(continued_run_id="r0")
GOOD_ORIGIN = RunOrigin(initiator="continue_as_new", previous=OURS, continued_into_this=True)


def test_a_continuation_with_its_own_record_is_admitted() -> None:
    info = CONTINUED
    assert continuation_refused(info, GOOD_ORIGIN, state_of(info).origin) is None  # type: ignore[arg-type]


class Admitted(Exception):
    """The check went past what Temporal's record shows (on to open the run)."""


@dataclass
class Run:
    """The part a check is handed (`Start`), with only the record of who the run is:
    anything more it asks for means the record's part of the check admitted the run."""

    origin: Origin

    def __getattr__(self, name: str) -> Any:
        raise Admitted(name)


async def decided(
    request: RunRequest, info: Info, origin: RunOrigin | None, state: RunState, mp: Any
) -> str | None:
    """What the admission says of a start, as `AgentWorkflow` asks it: what the start
    event alone shows, a forged start, then the check of the row the beginning names."""
    refused = admission.before_parsing(request, info, True)  # type: ignore[arg-type]
    refused = refused or admission.forged_start(request, state, info)  # type: ignore[arg-type]
    if refused is not None:
        return refused
    beginning = admission.beginning_of(request, info, origin)  # type: ignore[arg-type]
    mp.setattr(workflow, "info", lambda: info)
    run: Any = Run(state.origin)
    try:
        await ADMISSION[beginning].admits(run, Begun(request, beginning, origin))
    except ApplicationError as err:
        return err.message
    except Admitted:
        return None
    raise AssertionError("a check either refuses or opens the run")


# Each hostile case: (request, info, origin, identity, what the refusal says).
HOSTILE = {
    "fresh start carrying a state": (CARRIES, Info(), None, "victim-r1@r1", "may not carry"),
    "retry attempt carrying a state": (
        CARRIES, Info(continued_run_id="r0", attempt=2), None, "victim-r1@r1", "retry run",
    ),
    "cron run carrying a state": (
        CARRIES, CONTINUED, GOOD_ORIGIN.model_copy(update={"initiator": "cron"}),
        "victim-r1@r1", "cron run is never a continuation",
    ),
    "retry initiator carrying a state": (
        CARRIES, CONTINUED, GOOD_ORIGIN.model_copy(update={"initiator": "retry"}),
        "victim-r1@r1", "retry run is never a continuation",
    ),
    "previous run gone": (
        CARRIES, CONTINUED, GOOD_ORIGIN.model_copy(update={"previous": OtherRun(found=False)}),
        "victim-r1@r1", "cannot be shown",
    ),
    "previous run someone else's": (
        CARRIES, CONTINUED,
        GOOD_ORIGIN.model_copy(update={"previous": OURS.model_copy(update={"workflow_type": "X"})}),
        "victim-r1@r1", "continued from a X",
    ),
    "previous run on another queue": (
        CARRIES, CONTINUED,
        GOOD_ORIGIN.model_copy(update={"previous": ELSEWHERE}),
        "victim-r1@r1", "not from a run of this deployment",
    ),
    "previous run continued into another input": (
        CARRIES, CONTINUED, GOOD_ORIGIN.model_copy(update={"continued_into_this": False}),
        "victim-r1@r1", "did not continue as new into this run",
    ),
    "empty identity": (CARRIES, CONTINUED, GOOD_ORIGIN, None, "belongs to another run"),
    "another identity": (CARRIES, CONTINUED, GOOD_ORIGIN, "victim-r1@r9", "belongs to another"),
    "child of a parent gone": (
        RunRequest(goal="g", delegated_by=DELEGATED),
        Info(parent=Parent()), RunOrigin(initiator="start", parent=OtherRun(found=False)),
        "victim-r1@r1", "cannot be shown",
    ),
    "run_agent from another queue": (
        RunRequest(goal="g"), Info(parent=Parent()),
        RunOrigin(initiator="start", parent=ELSEWHERE),
        "victim-r1@r1", "not by a run of this deployment",
    ),
    "packed state past the bound": (
        RunRequest(goal="g", resume_state_packed="A" * (MAX_PACKED_STATE_CHARS + 1)),
        CONTINUED, GOOD_ORIGIN, "victim-r1@r1", f"over {MAX_PACKED_STATE_CHARS} characters",
    ),
    "child of a parent of another type": (
        RunRequest(goal="g", delegated_by=DELEGATED), Info(parent=Parent()),
        RunOrigin(initiator="start", parent=OURS.model_copy(update={"workflow_type": "Fake"})),
        "victim-r1@r1", "delegated to by a Fake, not by an agent run",
    ),
    "state packed by an earlier run of the chain": (
        RunRequest(goal="g", resume_state_packed="r-earlier.eJwDAAAAAAE="),
        CONTINUED, GOOD_ORIGIN, "victim-r1@r1", "packed by run r-earlier, not by run r0",
    ),
    "odd id": (RunRequest(goal="g"), Info(workflow_id="victim-r1@r1"), None, "x", "run id"),
    "id with a newline": (RunRequest(goal="g"), Info(workflow_id="a\nb"), None, "x", "run id"),
    "id with a path": (RunRequest(goal="g"), Info(workflow_id="../etc"), None, "x", "run id"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(HOSTILE))
async def test_a_hostile_beginning_is_refused_in_one_line(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    request, info, origin, identity, says = HOSTILE[case]
    state = state_of(info, identity) if identity != "x" else state_of(Info())
    refused = await decided(request, info, origin, state, monkeypatch)
    assert refused is not None and refused.startswith("refused: ") and "\n" not in refused
    assert says in refused, refused


async def test_a_continuation_its_record_shows_is_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    said = await decided(CARRIES, CONTINUED, GOOD_ORIGIN, state_of(CONTINUED), monkeypatch)
    assert said is None


def test_each_beginning_is_told_apart() -> None:
    """beginning_of, for each row: a way added to Beginning without being told apart
    here fails."""
    told = {
        Beginning.FRESH: (RunRequest(goal="g"), Info(), None),
        Beginning.CONTINUED: (CARRIES, CONTINUED, GOOD_ORIGIN),
        Beginning.CRON: (RunRequest(goal="g"), CONTINUED, RunOrigin(initiator="cron")),
        Beginning.RETRY: (RunRequest(goal="g"), Info(continued_run_id="r0", attempt=2), None),
        Beginning.CHILD: (
            RunRequest(goal="g", delegated_by=DELEGATED), Info(parent=Parent()), None,
        ),
        Beginning.RUN_AGENT: (RunRequest(goal="g"), Info(parent=Parent()), None),
        Beginning.FORK: (
            RunRequest(goal="g", fork=ForkSpec(parent_run_id="p", state={})), Info(), None,
        ),
        Beginning.SHADOW: (RunRequest.model_validate({"goal": "g", "shadow": {}}), Info(), None),
        Beginning.SCHEDULED: (
            RunRequest(goal="g").model_copy(update={"subject_grant": SCHEDULE_GRANT}),
            Info(), None,
        ),
    }  # fmt: skip
    assert set(told) == set(Beginning)
    for beginning, (request, info, origin) in told.items():
        assert admission.beginning_of(request, info, origin) is beginning  # type: ignore[arg-type]


async def _refused_by_the_test(run: Start, begun: Begun) -> None:
    raise ApplicationError(
        f"refused: the test's row ({begun.beginning.value})", type="StartRefused",
        non_retryable=True,
    )  # fmt: skip


@pytest.mark.usefixtures("ts_worker")
async def test_a_run_is_decided_by_its_rows_check(
    time_env: Any, ts_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One row's check replaced: a real run begun that way is decided by it, before any
    activity; the table is what `AgentWorkflow.run` asks, and nothing else."""
    refusing = replace(ADMISSION[Beginning.FRESH], admits=_refused_by_the_test)
    monkeypatch.setitem(ADMISSION, Beginning.FRESH, refusing)
    client: Client = time_env.client
    rid = f"row-{uuid.uuid4().hex[:8]}"
    request = RunRequest(goal="pay", agent="invoice", label="pay-invoice")
    handle = await client.start_workflow(
        AgentWorkflow.run, request, id=rid, task_queue=ts_settings.task_queue
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), cause
    assert cause.message == "refused: the test's row (fresh start)"
    history = await handle.fetch_history()
    assert not [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
