"""Eight promises the code keeps, each held by a test through the path a user or an
attacker takes (issue 56): the `temporal` CLI, the client, a team's workflow, the worker.

Most share one worker on a dev server of this module's own (its CLI calls meet no other
file's load): it serves the bundled examples beside an agent whose author requires signed
decisions and an agent with a typed answer, and counts a run's subject only with a grant
(AGENT_SUBJECT_KEYS). The typed run that meets a changed answer type has a queue and
workers of its own; the escalation, a time-skipping server of its own."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from durable_agents import Agent, RunPolicy
from durable_agents.activities.stores import Stores, open_database
from durable_agents.activities.stream import DeltaStore
from durable_agents.client import AgentClient, RunError
from durable_agents.control import conversations, runs, schedules
from durable_agents.control import signer as signer_module
from durable_agents.control.live import shown
from durable_agents.control.signer import Signer, write_new_key
from durable_agents.infra.offline_model.embedded import EmbeddedModelServer
from durable_agents.runtime.settings import DEFAULT_AGENT_MODULES, Settings, SubjectKeySetting
from durable_agents.testing import call, say
from durable_agents.worker.main import build_worker
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RunRequest, TrustedKey
from durable_agents.workflows.people_inputs import Actor, Answer, DecideRequest
from durable_agents.workflows.prune import PruneWorkflow
from durable_agents.workflows.records import ApprovalStatus
from durable_agents.workflows.registry import AgentRegistry, load_registry
from durable_agents.workflows.signing import public_key_of
from durable_agents.workflows.whatif import whatif_queue
from tests.conftest import count_effects, eventually, run_id, settings_for, wait_for_approval
from tests.integration.kept_promises_agents import (
    GOOD,
    SCRIPT,
    SCRIPTED,
    AsksAnotherModel,
    Shipment,
    Verdict,
    typed,
)
from tests.temporal_cli import own_dev_server, temporal

# The author's own key: the agent counts only decisions it signed.
DESK_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
signed_desk = Agent(
    name="signed-desk",
    instructions="Refund what you are asked to.",
    planning=False,
    model=SCRIPTED,
    policy=RunPolicy(
        require_signed_decisions=True,
        trusted_keys={"desk": TrustedKey(public_key=public_key_of(DESK_KEY))},
    ),
)


class Urgent(BaseModel):
    """The agent's fields, with a narrower priority than its answer has."""

    refund: bool
    priority: Literal["urgent"]


class Changed:
    """A later build's answer type: the same name, another schema."""

    class Verdict(BaseModel):
        refund: bool
        priority: str
        note: str = ""


typed_changed = Agent(
    name="typed",
    instructions="Decide.",
    planning=False,
    model=SCRIPTED,
    output_type=Changed.Verdict,
)


@dataclass
class Deployment:
    """The shared worker's world: its client, settings, a starter holding the subject
    key, the agents it serves and its stores."""

    client: Client
    settings: Settings
    starter: Settings
    agents: AgentClient
    stores: Stores

    def subject(self) -> tuple[dict[str, str], str]:
        """A customer of this test's own, and its memory namespace."""
        who = f"jane{uuid.uuid4().hex[:6]}"
        return {"customer": who}, f"customer/{who}"


@pytest.fixture(scope="module")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    async with own_dev_server() as env:
        yield env


@pytest.fixture(scope="module")
async def deployment(
    dev_env: WorkflowEnvironment,
    model_server: EmbeddedModelServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Deployment]:
    folder = tmp_path_factory.mktemp("kept")
    public = write_new_key(folder / "ops.key")
    settings = settings_for(dev_env.client, folder / "data", model_server.port).model_copy(
        update={
            "subject_keys": {"ops": SubjectKeySetting(public_key=public, namespaces=["customer/*"])}
        }
    )
    starter = settings.model_copy(
        update={"signing_key_file": folder / "ops.key", "signing_key_id": "ops"}
    )
    registry = load_registry(DEFAULT_AGENT_MODULES.split(",")).add(signed_desk, typed)
    workflows = (AgentWorkflow, PruneWorkflow, AsksAnotherModel)
    async with build_worker(dev_env.client, settings, workflows, registry=registry):
        yield Deployment(
            dev_env.client,
            settings,
            starter,
            AgentClient(dev_env.client, starter, registry),
            Stores.open(settings),
        )


async def started_plainly(
    client: Client, queue: str, wid: str, request: dict[str, Any], *extra: str
) -> None:
    """Started through the `temporal` CLI, as anyone who reaches Temporal may."""
    started = await temporal(
        client, "workflow", "start", "--type", "AgentWorkflow", "--task-queue", queue,
        "--workflow-id", wid, "--input", json.dumps(request), *extra,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr


async def refusal(client: Client, wid: str) -> str:
    """Why the run failed (a run that did not fail fails the test)."""
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(client.get_workflow_handle(wid).result(), timeout=60)
    return str(getattr(failed.value.cause, "message", failed.value.cause))


# 1. The run itself refuses a start that turns signing off.
async def test_a_plain_start_that_turns_signing_off_is_refused_by_the_run(
    deployment: Deployment,
) -> None:
    client, wid = deployment.client, run_id("unsigned")
    request = RunRequest(goal="Refund jane 80 EUR", agent="signed-desk").model_dump(mode="json")
    lax = request | {"policy": {"require_signed_decisions": False}}
    await started_plainly(client, deployment.settings.task_queue, wid, lax)
    assert await refusal(client, wid) == (
        "refused: the requested policy loosens the agent's: require_signed_decisions must stay on"
    )
    history = await client.get_workflow_handle(wid).fetch_history()
    assert not any(e.HasField("activity_task_scheduled_event_attributes") for e in history.events)


# 2. A typed answer is the asked model, validated.
async def test_a_typed_answer_is_the_asked_model_or_no_answer(deployment: Deployment) -> None:
    run = await deployment.agents.start("typed", "Customer 42 was charged twice")
    answer = await run.output(Verdict)
    assert type(answer) is Verdict and answer == Verdict(refund=True, priority="high")
    with pytest.raises(RunError, match=rf"^run {run.run_id}'s answer is no Shipment: "):
        await run.output(Shipment)
    with pytest.raises(RunError, match=rf"^run {run.run_id}'s answer is no Urgent: "):
        await run.output(Urgent)
    # A team's workflow that asks the agent through a copy naming another model.
    child = run_id("typed-child")
    with pytest.raises(WorkflowFailureError) as failed:
        await deployment.client.execute_workflow(
            AsksAnotherModel.run,
            child,
            id=run_id("team"),
            task_queue=deployment.settings.task_queue,
            execution_timeout=timedelta(seconds=60),
        )
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "AgentGaveNoAnswer"
    assert cause.message.startswith(f"run {child}'s answer is no Shipment: ")
    assert (await deployment.agents.run(child).result()).output == json.loads(GOOD)


# 3. A run keeps the answer type it recorded.
async def task_failure_or_close(client: Client, rid: str) -> str | None:
    """The message of the run's first failed workflow task, or how it closed."""
    handle = client.get_workflow_handle(rid)
    for event in (await handle.fetch_history()).events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            return str(event.workflow_task_failed_event_attributes.failure.message)
    status = (await handle.describe()).status
    if status != WorkflowExecutionStatus.RUNNING:
        return f"closed: {status}"
    return None


async def test_a_run_waits_for_the_answer_type_it_recorded(
    dev_env: WorkflowEnvironment, model_server: EmbeddedModelServer, tmp_path: Path
) -> None:
    """Recorded: a Verdict of two fields. A later build's agent answers a Verdict of
    three: its worker fails the run's task instead of reading the answer as that, and the
    run stays open, waiting for a worker with the recorded type. (Left waiting: a worker
    with it would take the run only once the task the later build holds times out.)"""
    client = dev_env.client
    settings = settings_for(client, tmp_path / "data", model_server.port, versioning=False)
    recorded = AgentRegistry().add(typed)
    agents = AgentClient(client, settings, recorded)
    rid = run_id("typed-kept")
    # Valid for both types: a worker that took the later one would complete the run.
    SCRIPT.runs[rid] = [call("ask_human", question="Which customer?"), say(GOOD)]
    async with build_worker(client, settings, registry=recorded):
        run = await agents.start("typed", "Customer 42 was charged twice", run_id=rid)
        question = await run.next_question()
    async with build_worker(client, settings, registry=AgentRegistry().add(typed_changed)):
        # Answered as `temporal workflow signal` would: the later build takes the task.
        answer = Answer(question_id=question.question_id, answer="42", by="alice")
        await runs.handle(client, rid).signal("answer", answer)
        failure = await eventually(lambda: task_failure_or_close(client, rid))
        assert "declares another answer type than when the run started" in failure, failure
        handle = client.get_workflow_handle(rid)
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    await handle.terminate("the test is over")


# 4. Forgetting twice.
async def chat(deployment: Deployment, subject: dict[str, str] | None, cid: str, text: str) -> str:
    """A support chat (about `subject`, granted by the starter's key) that says `text`:
    its store key."""
    request = conversations.conversation_request("support-chat", label="chat", subject=subject)
    client = deployment.client
    await conversations.open_conversation(client, deployment.starter, request, cid)
    await conversations.send(client, cid, conversations.message(text, by="jane"))
    return (await runs.get_state(client, cid)).store_key


async def closed(deployment: Deployment, cid: str) -> None:
    await conversations.close(deployment.client, cid, Actor(by="jane"))
    await runs.wait_for_outcome(deployment.client, cid)


async def test_forgetting_again_clears_a_run_that_was_open_the_first_time(
    deployment: Deployment,
) -> None:
    subject, namespace = deployment.subject()
    cid = run_id("chat")
    key = await chat(deployment, subject, cid, "Please remember that I prefer email")
    transcript = deployment.stores.transcript

    first = await deployment.agents.forget_subject(namespace)
    assert len(first.memories) == 1
    assert (first.runs_cleared, first.runs_open) == ([], [key])
    assert transcript.read(key) != []  # open: its next turn reads it

    await closed(deployment, cid)
    second = await deployment.agents.forget_subject(namespace)
    assert (second.memories, second.runs_cleared, second.runs_open) == ([], [key], [])
    assert transcript.read(key) == [] and deployment.stores.ledger.pruned(key)


# 5. A Schedule's grant is for its own run only.
async def test_a_schedules_run_id_started_again_with_its_grant_is_refused(
    deployment: Deployment,
) -> None:
    client, queue = deployment.client, deployment.settings.task_queue
    subject, namespace = deployment.subject()
    name = run_id("nightly")
    nightly = RunRequest(goal="Check the account", agent="support-chat", subject=subject)
    await schedules.create(client, deployment.starter, name, nightly, every=timedelta(days=1))
    try:
        await schedules.trigger(client, name)

        async def scheduled_run() -> str | None:
            async for found in client.list_workflows(f"TemporalScheduledById = '{name}'"):
                return found.id
            return None

        wid = await eventually(scheduled_run)
        outcome = await asyncio.wait_for(runs.wait_for_outcome(client, wid), timeout=60)
        assert outcome["status"] == "completed", outcome
        assert (await runs.get_state(client, wid)).memory_namespace == namespace
        first = client.get_workflow_handle(wid).fetch_history_events(page_size=1)
        started = await runs.started_request(client.data_converter, await anext(aiter(first)))
        assert started is not None and started.subject_grant is not None
        assert started.subject_grant.run == f"schedule:{name}"
        # Its id started again, its grant copied in, saying the Schedule started it.
        said = f"--search-attribute=TemporalScheduledById={json.dumps(name)}"
        copied = started.model_dump(mode="json")
        await started_plainly(client, queue, wid, copied, said)
        assert await refusal(client, wid) == (
            f"refused: the subject's grant is for 'schedule:{name}', not this run"
        )
    finally:
        await schedules.delete(client, name)


# 6. An escalation hands the decision on.
async def test_the_escalation_approvers_signed_decision_after_the_first_deadline_counts_once(
    own_clock: WorkflowEnvironment,
    model_server: EmbeddedModelServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a time-skipping server of this module's own: the approval waits past its first
    deadline and goes to the cfo, who signs by the server's clock half an hour later. That
    decision pays, once; the same signed decision sent again is refused."""
    client, rid = own_clock.client, run_id("escalated")
    settings = settings_for(client, tmp_path / "data", model_server.port, versioning=False)
    cfo = Signer(Ed25519PrivateKey.generate(), "cfo-laptop")
    policy = {
        "decision_timeout_seconds": 3600,
        "on_timeout": "escalate",
        "escalate_to": ["cfo"],
        "require_signed_decisions": True,
        "trusted_keys": {"cfo-laptop": {"public_key": cfo.public_key, "signs_for": ["cfo"]}},
    }
    request = RunRequest.model_validate({"goal": "pay", "label": "pay-invoice", "policy": policy})
    async with build_worker(client, settings):
        await runs.start_run(client, settings, request, rid)
        asked = (await wait_for_approval(client, rid)).pending_approvals[0]
        await own_clock.sleep(timedelta(minutes=90))  # past the first deadline: escalated

        async def escalated() -> bool:
            summary = await runs.get_summary(client, rid)
            return bool(summary.pending_approvals and summary.pending_approvals[0].escalated)

        await eventually(escalated)
        # The cfo signs now: half an hour past the first deadline by the run's clock, the
        # server's (skipped 90 minutes ahead of the wall clock a signer reads).
        now = await own_clock.get_current_time()
        assert now > asked.requested_at + timedelta(minutes=85)
        monkeypatch.setattr(signer_module, "_now", lambda: now.isoformat(timespec="seconds"))
        state = await runs.get_state(client, rid)
        decision = DecideRequest(approve=True, by="cfo")
        moment = await runs.latest_moment(client, rid)
        signed = runs.signed_decision(state, decision, cfo, moment)
        said = await runs.decide(client, rid, signed)
        assert said.startswith("approved: pay_invoice") and said.endswith("by cfo"), said
        with pytest.raises(RunError):  # the same signed decision again: it counted once
            await runs.decide(client, rid, signed)
        result = await runs.wait_result(client, rid)
        [approval] = (await runs.get_state(client, rid)).approvals
    assert result.status == "completed"
    assert approval.status is ApprovalStatus.APPROVED and approval.escalated
    assert approval.decided_by == "cfo"
    assert count_effects(settings, rid, "charge") == 1


# 7. Forgetting spares a later chain.
async def test_forgetting_spares_the_live_log_of_a_later_chain_under_the_id(
    deployment: Deployment,
) -> None:
    """A closed chat about jane, then another chain started under its id (anyone may:
    Temporal's default reuse policy), about nobody. Forgetting jane clears the first
    chain's copies; the live log under the id is the later chain's now, and stays."""
    client = deployment.client
    subject, namespace = deployment.subject()
    cid = run_id("chat")
    first_key = await chat(deployment, subject, cid, "Please remember that I prefer email")
    await closed(deployment, cid)
    later = conversations.conversation_request("support-chat", label="chat")
    await client.start_workflow(
        "AgentWorkflow", later, id=cid, task_queue=deployment.settings.task_queue
    )
    hello = conversations.message("Hi, how are you doing today?", by="bob")
    reply = await conversations.send(client, cid, hello)
    live_log = DeltaStore(open_database(deployment.settings))
    logged = live_log.read(cid)
    assert reply.reply in shown(logged).values()

    report = await deployment.agents.forget_subject(namespace)
    assert (report.runs_cleared, report.runs_open) == ([first_key], [])
    assert deployment.stores.transcript.read(first_key) == []
    assert live_log.read(cid) == logged


# 8. A what-if shadow that continues as new stays its what-if's.
async def continued(client: Client, wid: str) -> bool:
    """Whether the run's chain went on in a fresh run (continue-as-new)."""
    described = await client.get_workflow_handle(wid).describe()
    return described.raw_description.workflow_execution_info.first_run_id != described.run_id


async def test_a_shadow_that_continues_as_new_stays_its_what_ifs(deployment: Deployment) -> None:
    client, rid = deployment.client, run_id("long")
    request = RunRequest.model_validate(
        {"goal": "b", "label": "long?steps=6", "limits": {"continue_as_new_after_events": 50}}
    )
    await runs.start_run(client, deployment.settings, request, rid)
    assert (await runs.wait_result(client, rid)).status == "completed"
    assert await continued(client, rid)

    report = await deployment.agents.what_if([rid])
    [played] = report.runs
    assert played.now.status == "completed", played.now.error
    assert played.differences == []
    assert played.now.model_calls == played.now.memoized_calls == played.then.model_calls
    assert await continued(client, played.shadow_id)
    described = await client.get_workflow_handle(played.shadow_id).describe()
    assert whatif_queue(described.task_queue), described.task_queue
