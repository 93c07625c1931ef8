"""Every door into the worker: each activity it registers has a rule for who may call it
(worker/callers.py: CALLED_BY), and each refuses every caller that is not a run of ours.
The table is the code's own lists: an activity registered without a rule, or a rule for
no activity, fails here; a new activity is tried with every foreign caller.

Foreign callers, each a workflow of anyone's scheduling our activity on our task queue
with an input that would act: a workflow of another type on our queue; a workflow named
as the activity's caller on a queue of its own; and one named as ours on our queue whose
input names another run. Each is refused in one `refused:` line, non-retryable, before
the activity acts: our stores and the providers' journals are as they were."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from durable_agents.activities.shadow import Recordings
from durable_agents.infra.offline_model.embedded import EmbeddedModelServer
from durable_agents.runtime.settings import Settings
from durable_agents.worker.callers import CALLED_BY, REFUSED
from durable_agents.worker.main import build_worker
from durable_agents.worker.shadow import build_shadow_worker
from durable_agents.workflows.activity_io import (
    ChatMessage,
    EvaluationInput,
    ModelCallInput,
    ParentMoment,
    PruneRequest,
    ScheduledRun,
    SignatureClaim,
    ToolCallInput,
    TranscriptCopy,
)
from durable_agents.workflows.agent_records import MCPListRequest
from durable_agents.workflows.records import IDENTITY_SEPARATOR
from tests.conftest import EXAMPLE_AGENTS, pay_invoice_call, run_id, settings_for
from tests.integration.test_outside_callers import journal

# The run every input acts for: nobody's here, a victim of ours elsewhere.
VICTIM_ID = run_id("victim")
VICTIM = f"{VICTIM_ID}{IDENTITY_SEPARATOR}first-run"
# An input for each activity whose input is a model: one that acts if the activity runs
# (pays, claims a nonce, writes a transcript). An activity taking a string is given the
# victim's id; one taking another type fails the test until it is given one here.
SAMPLES: dict[str, BaseModel] = {
    "call_model": ModelCallInput(
        run_id=VICTIM,
        append=[ChatMessage(seq=0, role="user", content="Pay invoice INV-1001")],
        reply_seq=1,
    ),
    "run_tool": pay_invoice_call(VICTIM),
    "call_mcp_tool": ToolCallInput(
        run_id=VICTIM,
        step=1,
        tool_call_id="c1",
        name="kb_search",
        arguments={"q": "x"},
        result_seq=3,
        agent="support",
        mcp="kb",
        mcp_name="search",
    ),
    "list_mcp_tools": MCPListRequest(run_id=VICTIM, agent="support", server="kb"),
    "evaluate_call": EvaluationInput(agent="invoice", rule="amount", call={"amount": "9"}),
    "copy_transcript": TranscriptCopy(from_run_id=VICTIM, to_run_id=VICTIM, before_seq=10),
    "parent_state_at": ParentMoment(parent_run_id=VICTIM_ID, moment=1),
    "scheduled_run": ScheduledRun(schedule_id="nightly", workflow_id=VICTIM_ID, first_run_id="r"),
    "claim_signature": SignatureClaim(nonce="nonce-1", run_id=VICTIM, what="a decision"),
    "prune_stored_runs": PruneRequest(older_than_seconds=10 * 365 * 86400.0),
}


def names_a_run(sample: object) -> bool:
    """Whether the input says which run it acts for (as worker/callers.py reads it)."""
    return any(isinstance(getattr(sample, name, None), str) for name in ("to_run_id", "run_id"))


ACTIVITIES = sorted(CALLED_BY)
NAMING_A_RUN = sorted(name for name, sample in SAMPLES.items() if names_a_run(sample))


@dataclass
class Knock:
    """One activity of ours, scheduled on our queue with these arguments."""

    activity: str
    queue: str
    args: list[Any] = field(default_factory=list)


@dataclass
class Answer:
    """What the workflow that knocked was told: the failure's type, message, whether it
    may be retried and how Temporal's retries ended; `ran` when the activity answered."""

    ran: bool = False
    type: str = ""
    message: str = ""
    non_retryable: bool = False
    retry_state: str = ""


async def knock_on(door: Knock) -> Answer:
    try:
        await workflow.execute_activity(
            door.activity,
            args=door.args,
            task_queue=door.queue,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=2, initial_interval=timedelta(seconds=0.1)),
        )
    except ActivityError as err:
        cause = err.cause
        return Answer(
            type=str(getattr(cause, "type", "") or type(cause).__name__),
            message=str(getattr(cause, "message", cause)),
            non_retryable=bool(getattr(cause, "non_retryable", False)),
            retry_state=err.retry_state.name if err.retry_state is not None else "",
        )
    return Answer(ran=True)


# A type none of our activities is called by.
STRANGER = "Stranger"


@workflow.defn(dynamic=True)
class Anyones:
    """A workflow of anyone's, of whatever type it is started as: a stranger, or named
    as the workflow that calls our activity."""

    @workflow.run
    async def run(self, args: Sequence[RawValue]) -> Answer:
        door = workflow.payload_converter().from_payload(args[0].payload, Knock)
        return await knock_on(door)


@dataclass
class Doors:
    settings: Settings
    registered: dict[str, Callable[..., Any]]
    elsewhere: str  # the task queue of the impostors' own


def registered_activities(worker: Worker) -> dict[str, Callable[..., Any]]:
    return {
        activity._Definition.must_from_callable(fn).name or "": fn
        for fn in worker.config(active_config=True).get("activities", ())
    }


def anyones_worker(client: Client, task_queue: str) -> Worker:
    return Worker(
        client, task_queue=task_queue, workflows=[Anyones],
        workflow_runner=UnsandboxedWorkflowRunner(),
    )  # fmt: skip


@pytest.fixture(scope="module")
async def doors(
    dev_env: WorkflowEnvironment,
    model_server: EmbeddedModelServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Doors]:
    """Our worker serving its activities only, so the one running workflows on our queue
    is anyone's worker polling it; that one, and one on a queue of its own, for the module.
    Unversioned: anyone's worker takes our queue's workflow tasks as it would there."""
    client = dev_env.client
    data = tmp_path_factory.mktemp("doors") / "data"
    settings = settings_for(client, data, model_server.port, versioning=False)
    elsewhere = f"anyones-{uuid.uuid4().hex[:8]}"
    async with (
        build_worker(client, settings, workflows=()) as worker,
        anyones_worker(client, settings.task_queue),
        anyones_worker(client, elsewhere),
    ):
        yield Doors(settings, registered_activities(worker), elsewhere)


def written(settings: Settings) -> tuple[dict[str, int], int]:
    """Our stores' rows, table by table, and every effect the providers performed."""
    with sqlite3.connect(settings.database_path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        rows = {t: db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    return rows, len(journal(settings))


def arguments(name: str, registered: Callable[..., Any]) -> list[Any]:
    """The activity's input that would act: its sample, or the victim's id."""
    if name in SAMPLES:
        return [SAMPLES[name]]
    types = activity._Definition.must_from_callable(registered).arg_types or []
    if not types or types[0] is str:
        return [VICTIM_ID]
    raise AssertionError(
        f"no input for {name} ({types[0]}): add one to SAMPLES, so that its refusal is "
        "tried with an input that would act"
    )


async def knocked(
    doors: Doors, dev_env: WorkflowEnvironment, name: str, kind: str, queue: str
) -> Answer:
    """The activity, called by a `kind` workflow running on `queue`; nothing written."""
    assert name in doors.registered, f"{name} has a caller rule but no worker registers it"
    door = Knock(name, doors.settings.task_queue, arguments(name, doors.registered[name]))
    before = written(doors.settings)
    said: Answer = await dev_env.client.execute_workflow(
        kind,
        door,
        result_type=Answer,
        id=run_id(f"knock-{name.replace('_', '-')}"),
        task_queue=queue,
        execution_timeout=timedelta(minutes=2),
    )
    assert not said.ran, f"{name} ran for a caller that is not our run"
    assert said.type == REFUSED, said
    assert said.message.startswith("refused: ") and "\n" not in said.message, said.message
    assert said.non_retryable and said.retry_state == "NON_RETRYABLE_FAILURE", said
    assert written(doors.settings) == before, f"{name} wrote before it was refused"
    return said


async def test_every_activity_the_worker_registers_has_a_caller_rule(
    dev_env: WorkflowEnvironment, doors: Doors
) -> None:
    """The production worker's list, and the what-if worker's within it."""
    built = doors.settings.model_copy(update={"task_queue": f"{doors.settings.task_queue}-built"})
    production = build_worker(dev_env.client, built)
    registered = set(registered_activities(production))
    assert registered - set(CALLED_BY) == set(), "registered without a caller rule"
    assert set(CALLED_BY) - registered == set(), "a caller rule for no registered activity"
    workflows = production.config(active_config=True)["workflows"]
    callers = {workflow._Definition.must_from_class(w).name for w in workflows}
    assert set(CALLED_BY.values()) <= callers, "a caller rule names a workflow not served"
    assert set(SAMPLES) <= registered, "an input kept here for no registered activity"
    whatif = build_shadow_worker(
        dev_env.client, built, EXAMPLE_AGENTS, Recordings(calls={}), f"{built.task_queue}-whatif"
    )
    assert set(registered_activities(whatif)) - set(CALLED_BY) == set()


@pytest.mark.parametrize("name", ACTIVITIES)
async def test_a_workflow_of_another_type_on_our_queue_is_refused(
    dev_env: WorkflowEnvironment, doors: Doors, name: str
) -> None:
    said = await knocked(doors, dev_env, name, STRANGER, doors.settings.task_queue)
    assert f"{name} is called only by {CALLED_BY[name]}, not Stranger" in said.message


@pytest.mark.parametrize("name", ACTIVITIES)
async def test_a_workflow_named_as_ours_on_another_queue_is_refused(
    dev_env: WorkflowEnvironment, doors: Doors, name: str
) -> None:
    said = await knocked(doors, dev_env, name, CALLED_BY[name], doors.elsewhere)
    queues = f"runs on task queue {doors.elsewhere!r}, not on {doors.settings.task_queue!r}"
    assert queues in said.message, said.message


@pytest.mark.parametrize("name", NAMING_A_RUN)
async def test_a_workflow_named_as_ours_on_our_queue_acting_for_another_run_is_refused(
    dev_env: WorkflowEnvironment, doors: Doors, name: str
) -> None:
    said = await knocked(doors, dev_env, name, CALLED_BY[name], doors.settings.task_queue)
    assert f"the input names run {VICTIM!r}, not the calling run knock-" in said.message
