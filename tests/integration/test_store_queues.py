"""Replicas with stores of their own never wait for luck (activities/store_queue.py): two
workers in this process, on one task queue of the dev server, each with its own SQLite
store under its own data dir, as two replicas run.

- A six-message conversation (four plain messages, a model call each, and two order
  look-ups, a model call, a tool call and a model call for the reply): every turn is
  answered and no call was ever refused for its store: no
  attempt of any activity failed with StoreMissingRecords, no wait for a store began
  (read from the history, not from timing). The first model call learned the queue of
  the replica whose store took the run; every store-bound call after it was scheduled
  there, those of the run it continued as new into too; the other replica's store holds
  none of the run.
- The replica holding the store goes: a message then waits on that store's queue,
  scheduled, and `agentctl show` and `list` say so, naming the queue; the replica comes
  back on the same data dir (the same store, so the same queue) and the turn is answered,
  still with no refusal.
- Or it is given up: cancelled, it ends at once.
- On one shared store (PostgreSQL) nothing changes: every call on the main queue."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from durable_agents.activities.stores import open_database
from durable_agents.activities.transcript import TranscriptStore
from durable_agents.control import conversations, runs
from durable_agents.control.timeline import fetch_chain
from durable_agents.infra.stack import settings_env
from durable_agents.runtime.settings import Settings
from durable_agents.worker.main import AgentWorker, build_worker
from durable_agents.workflows.activity_io import STORE_MISSING
from durable_agents.workflows.activity_options import STORE_BOUND
from durable_agents.workflows.contracts import RunLimits
from durable_agents.workflows.people_inputs import Actor
from tests.conftest import drop_schema, eventually, key_of, postgres_or_skip

AGENTCTL = str(Path(sys.executable).parent / "agentctl")

MESSAGES = (
    "Hi there",
    "Where is my order A-1001?",
    "And how are you?",
    "Where is my order A-1002?",
    "Still there?",
    "Thanks, that is all",
)


def two_replicas(settings: Settings, tmp_path: Path) -> tuple[Settings, Settings]:
    """Two replicas' settings: a data dir each. And no cache of runs: a replica that keeps
    a run cached takes all its workflow tasks and hands the activities they schedule to
    itself (eager), so a run would stay with its store by luck; uncached, each task goes
    to either replica, as after a restart or a sticky queue's timeout."""
    return (
        settings.model_copy(update={"data_dir": tmp_path / "a", "workflow_cache_size": 0}),
        settings.model_copy(update={"data_dir": tmp_path / "b", "workflow_cache_size": 0}),
    )


@contextlib.asynccontextmanager
async def replica(client: Client, settings: Settings) -> AsyncIterator[AgentWorker]:
    """One replica: a worker of its own connection (the SDK takes one worker per queue
    and build on a connection, as a process of its own would have), on its data dir."""
    own = await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        data_converter=client.data_converter,
    )
    async with build_worker(own, settings) as worker:
        assert isinstance(worker, AgentWorker)
        yield worker


async def events_of(client: Client, cid: str) -> list[HistoryEvent]:
    """The events of every run of the conversation's continue-as-new chain, in order."""
    return [event for _, history in await fetch_chain(client, cid) for event in history.events]


async def refusals(client: Client, cid: str) -> list[str]:
    """Every sign in the run's history that a store refused a call: an attempt that
    failed with StoreMissingRecords (the started event of the attempt after it, or the
    failed event of the last), or a wait for a store."""
    converter = client.data_converter.payload_converter
    found = []
    for event in await events_of(client, cid):
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            failure = event.activity_task_started_event_attributes.last_failure
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            failure = event.activity_task_failed_event_attributes.failure
        elif event.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
            summary = event.user_metadata.summary
            named = converter.from_payload(summary, str) if summary.data else ""
            if named.startswith("store: "):
                found.append(named)
            continue
        else:
            continue
        if failure.application_failure_info.type == STORE_MISSING:
            found.append(failure.message)
    return found


async def store_bound_queues(client: Client, cid: str) -> list[str]:
    """The task queue each store-bound activity was scheduled on, in order."""
    return [
        scheduled.task_queue.name
        for event in await events_of(client, cid)
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and (scheduled := event.activity_task_scheduled_event_attributes).activity_type.name
        in STORE_BOUND
    ]


def rows_in(settings: Settings, key: str) -> int:
    return TranscriptStore(open_database(settings)).rows_of(key)


async def test_a_conversation_on_two_replicas_answers_every_turn_without_a_refusal(
    dev_env, settings, tmp_path
):
    client, cid = dev_env.client, f"chat-{uuid.uuid4().hex[:8]}"
    first, second = two_replicas(settings, tmp_path)
    async with replica(client, first) as a, replica(client, second) as b:
        assert a.store_queue and b.store_queue and a.store_queue != b.store_queue
        # It continues as new on the way: the next run of its chain goes where its store is.
        often = RunLimits(continue_as_new_after_events=50)
        request = conversations.conversation_request("support-chat", label="chat", limits=often)
        await conversations.open_conversation(client, first, request, cid)
        replies = []
        for text in MESSAGES:
            turn = await conversations.send(client, cid, conversations.message(text, by="jane"))
            assert turn.status == "answered", turn
            replies.append(turn.reply or "")
        state = await runs.get_state(client, cid)
    held, key = state.store_queue, state.store_key
    assert replies[0] == "You said: Hi there" and replies[-1] == "You said: Thanks, that is all"
    assert replies[1].startswith("Done: ") and replies[3].startswith("Done: ")
    assert len(await fetch_chain(client, cid)) > 1  # it did continue as new
    assert await refusals(client, cid) == []
    # The first model call went to the main queue and learned where the store is: every
    # store-bound call after it (seven more model calls, the look-ups' two tool calls)
    # there, the continued run's too.
    holder, other = (first, second) if held == a.store_queue else (second, first)
    assert held in (a.store_queue, b.store_queue)
    first_call, *later = await store_bound_queues(client, cid)
    assert first_call == settings.task_queue and len(later) == 9
    assert set(later) == {held}
    assert rows_in(holder, key) > 0 and rows_in(other, key) == 0


async def agentctl(settings: Settings, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, **settings_env(settings), "COLUMNS": "200"}
    process = await asyncio.create_subprocess_exec(
        AGENTCTL, *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def held_up_in_list(settings: Settings, cid: str) -> str:
    code, out, err = await agentctl(settings, "list", "--json")
    assert code == 0, err
    return next((r["held_up"] for r in json.loads(out) if r["run_id"] == cid), "")


async def test_a_run_whose_replica_is_gone_says_so_and_goes_on_when_it_is_back(
    dev_env, settings, tmp_path
):
    client, cid = dev_env.client, f"chat-{uuid.uuid4().hex[:8]}"
    first, second = two_replicas(settings, tmp_path)
    request = conversations.conversation_request("support-chat", label="chat")
    later = conversations.message("Are you still there?", by="jane")
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(replica(client, first))
        b = await stack.enter_async_context(replica(client, second))
        await conversations.open_conversation(client, first, request, cid)
        hello = await conversations.send(client, cid, conversations.message("Hi", by="jane"))
        assert hello.reply == "You said: Hi"
        held = (await runs.get_state(client, cid)).store_queue
        holder = first if held == a.store_queue else second
        survivor = b if held == a.store_queue else a
        await (a if survivor is b else b).shutdown()  # the holder goes

        await conversations.post(client, cid, later)
        said = f"waiting: the replica holding its store (queue {held}) is not polling"
        # Said once Temporal no longer counts the replica's last poll as recent.
        assert await eventually(lambda: runs.store_wait(client, cid), within=240) == said
        code, shown, err = await agentctl(settings, "show", cid)
        assert code == 0, err
        assert said in shown
        assert await held_up_in_list(settings, cid) == said

        back = await stack.enter_async_context(replica(client, holder))
        assert back.store_queue == held  # the same store: the same queue
        reply = await conversations.await_reply(client, cid, later.message_id)
        assert reply.reply == "You said: Are you still there?"
        assert await runs.store_wait(client, cid) == ""
        key = await key_of(client, cid)
    assert await refusals(client, cid) == []
    assert rows_in(second if holder is first else first, key) == 0


async def waiting_on(client: Client, cid: str) -> str:
    """The queue of the run's activity that no worker has been handed yet ("" if none)."""
    description = await runs.handle(client, cid).describe()
    scheduled = PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
    return next(
        (
            pending.activity_options.task_queue.name
            for pending in description.raw_description.pending_activities
            if pending.state == scheduled
        ),
        "",
    )


async def test_a_run_whose_replica_is_gone_can_be_given_up(dev_env, settings, tmp_path):
    """Cancelled, it ends at once, cancelled: its call was never handed to a worker."""
    client, cid = dev_env.client, f"chat-{uuid.uuid4().hex[:8]}"
    first, second = two_replicas(settings, tmp_path)
    request = conversations.conversation_request("support-chat", label="chat")
    async with replica(client, first) as a, replica(client, second) as b:
        await conversations.open_conversation(client, first, request, cid)
        await conversations.send(client, cid, conversations.message("Hi", by="jane"))
        held = (await runs.get_state(client, cid)).store_queue
        await (a if held == a.store_queue else b).shutdown()
        await conversations.post(client, cid, conversations.message("Hello?", by="jane"))
        assert await eventually(lambda: waiting_on(client, cid)) == held
        await runs.cancel(client, cid, Actor(by="ops", reason="its replica is gone"))
        outcome = await asyncio.wait_for(runs.wait_for_outcome(client, cid), timeout=60)
    assert outcome["status"] == "cancelled", outcome


async def test_on_one_shared_store_every_call_stays_on_the_main_queue(dev_env, settings, tmp_path):
    """With AGENT_DATABASE_URL every replica holds every run: no queue of a store's own,
    no stamp in any result, nothing in the run's state."""
    url, schema = postgres_or_skip(), f"t_{uuid.uuid4().hex[:12]}"
    shared = {"database_url": url, "database_schema": schema}
    first, second = (s.model_copy(update=shared) for s in two_replicas(settings, tmp_path))
    client, cid = dev_env.client, f"chat-{uuid.uuid4().hex[:8]}"
    try:
        async with replica(client, first) as a, replica(client, second) as b:
            assert a.store_queue is None and b.store_queue is None
            request = conversations.conversation_request("support-chat", label="chat")
            await conversations.open_conversation(client, first, request, cid)
            for text in MESSAGES[:2]:
                turn = await conversations.send(client, cid, conversations.message(text, by="jane"))
                assert turn.status == "answered", turn
            assert (await runs.get_state(client, cid)).store_queue is None
    finally:
        drop_schema(url, schema)
    assert set(await store_bound_queues(client, cid)) == {settings.task_queue}
    assert await refusals(client, cid) == []
