"""A call a worker's store refused (StoreMissingRecords) is never a failure of the run:
once its retries are spent, the run waits (a timer named for the refusal) and calls it
again, and the turn is answered whole when a worker whose store holds the run is back.
On the time-skipping server, with one model attempt per call, so the retries run out at
once and the waits are skipped.

The workers are a team's own with our plugin: they poll no queue of their store's own
(our worker does, worker/store_queue.py, and its runs' calls never reach another store:
tests/integration/test_store_queues.py), so a run's calls go to whichever polls."""

from __future__ import annotations

import uuid
from functools import partial

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_agents.control import conversations, runs
from durable_agents.runtime.settings import Settings
from durable_agents.testing import ScriptedModel, say
from durable_agents.worker.activities import production_activities
from durable_agents.worker.plugin import DurableAgentsPlugin
from durable_agents.workflows.contracts import RunLimits
from tests.conftest import eventually


@pytest.fixture(scope="module")
def time_env(own_time_env: WorkflowEnvironment) -> WorkflowEnvironment:
    """This module moves the clock: a server of its own (conftest `own_time_env`)."""
    return own_time_env


def team_worker(client: Client, settings: Settings, model: ScriptedModel) -> Worker:
    """Our plugin on a worker of the team's own, with no cache of runs (the time-skipping
    server would hold a stopped worker's tasks)."""
    plugin = DurableAgentsPlugin(
        settings=settings,
        activities=partial(production_activities, model_clients=lambda _s, _m: model),
    )
    return Worker(client, task_queue=settings.task_queue, plugins=[plugin], max_cached_workflows=0)


async def store_waits(client, cid) -> list[str]:
    """The summaries of the run's timers that wait for a store."""
    history = await runs.handle(client, cid).fetch_history()
    converter = client.data_converter.payload_converter
    names = [
        converter.from_payload(e.user_metadata.summary, str)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED and e.user_metadata.summary.data
    ]
    return [name for name in names if name.startswith("store: ")]


async def test_a_refused_call_waits_past_its_retries_and_the_turn_is_answered_whole(
    time_env, ts_settings, tmp_path
):
    client, cid = time_env.client, f"chat-{uuid.uuid4().hex[:8]}"
    model = ScriptedModel([say("Hello Jane."), say("Yes, still here.")])
    first, second = ts_settings, ts_settings.model_copy(update={"data_dir": tmp_path / "b"})
    request = conversations.conversation_request(
        "support-chat", label="chat", limits=RunLimits(model_max_attempts=1)
    )
    async with team_worker(client, first, model):
        await conversations.open_conversation(client, first, request, cid)
        hello = await conversations.send(client, cid, conversations.message("Hi", by="jane"))
    assert hello.reply == "Hello Jane."

    later = conversations.message("Are you still there?", by="jane")
    async with team_worker(client, second, model):
        await conversations.post(client, cid, later)

        async def waited_twice() -> list[str]:
            await time_env.sleep(61)  # past a wait: the call is made (and refused) again
            found = await store_waits(client, cid)
            return found if len(found) >= 2 else []

        waits = await eventually(waited_twice, within=60, interval=0.5)
    assert len(model.requests) == 1  # nothing asked on the store without the run
    second_store = f"sqlite:{(tmp_path / 'b' / 'agent.sqlite3')}"
    assert all("StoreMissingRecords" not in w and second_store in w for w in waits), waits
    assert "AGENT_DATABASE_URL" in waits[0]

    async with team_worker(client, first, model):

        async def answered():
            await time_env.sleep(301)  # the longest wait
            thread = await conversations.thread(client, cid)
            return [t for t in thread.turns if t.reply == "Yes, still here."]

        [turn] = await eventually(answered, within=60, interval=0.5)
    assert turn.status == "answered" and turn.error is None
    contents = [m.get("content") for m in model.requests[-1].messages]
    assert contents == ["Hi", "Hello Jane.", "Are you still there?"]
