"""Two replicas of the worker on one task queue, as processes, on the dev server: a
conversation's refund waits for a person on replica A, A is SIGKILLed, the approval goes
to replica B.

With separate SQLite stores (each replica's own AGENT_DATA_DIR, the default) the run's
tool call waits on the queue of A's store (worker/store_queue.py): B is never handed it,
refuses nothing, asks the model nothing and pays nothing; the conversation finishes whole
once A is back. On one PostgreSQL store B finishes it. One refund either way, and every
model request holds every earlier turn (each asks with more input tokens than the one
before)."""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import PendingActivityState, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from durable_agents.activities.store_queue import store_queue
from durable_agents.activities.stores import open_database
from durable_agents.activities.transcript import TranscriptStore
from durable_agents.control import conversations, runs
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.activity_io import STORE_MISSING
from durable_agents.workflows.people_inputs import Actor, DecideRequest
from tests.conftest import count_effects, drop_schema, eventually, key_of, postgres_or_skip
from tests.conftest import spawn_worker as spawn


def stats(model_server) -> dict[str, Any]:
    with urllib.request.urlopen(f"{model_server.base_url}/scripted/stats") as response:
        return dict(json.loads(response.read()))


def served(model_server, key: str) -> list[int]:
    """The sequence numbers the offline model answered for the run, in order."""
    return [s["seq"] for s in stats(model_server)["served"] if s["run"] == key]


async def polls(client: Client, settings: Settings, worker: subprocess.Popen[bytes]) -> bool:
    """Whether that worker process polls the queue's activities (its identity is pid@host)."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=settings.task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        )
    )
    return any(p.identity.startswith(f"{worker.pid}@") for p in response.pollers)


async def started(client: Client, settings: Settings, log: Path, **env: str):
    worker = spawn(settings, log, **env)
    await eventually(lambda: polls(client, settings, worker), within=60)
    return worker


def stop(worker: subprocess.Popen[bytes] | None, how: int = signal.SIGTERM) -> None:
    if worker is not None and worker.poll() is None:
        worker.send_signal(how)
        worker.wait(timeout=30)


async def refusal(client: Client, cid: str) -> tuple[str, str] | None:
    """The pending activity a worker's store refused, and its reason, as `describe` (and
    the Web UI) shows it."""
    description = await runs.handle(client, cid).describe()
    for pending in description.raw_description.pending_activities:
        failure = pending.last_failure
        if failure.application_failure_info.type == STORE_MISSING:
            return pending.activity_type.name, failure.message
    return None


async def waiting_on(client: Client, cid: str) -> tuple[str, str] | None:
    """The pending activity not yet handed to any worker, and the queue it waits on."""
    description = await runs.handle(client, cid).describe()
    for pending in description.raw_description.pending_activities:
        if pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED:
            return pending.activity_type.name, pending.activity_options.task_queue.name
    return None


async def model_inputs(client: Client, cid: str) -> list[int]:
    """Input tokens of each model call the run made, in order (from its history)."""
    history = await runs.handle(client, cid).fetch_history()
    kinds: dict[int, str] = {}
    tokens = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            kinds[event.event_id] = (
                event.activity_task_scheduled_event_attributes.activity_type.name
            )
        elif event.HasField("activity_task_completed_event_attributes"):
            done = event.activity_task_completed_event_attributes
            if kinds.get(done.scheduled_event_id) == "call_model":
                turn = json.loads(done.result.payloads[0].data)
                # A memoized turn spent nothing now: its usage is left out at its default.
                tokens.append(int(turn.get("usage", {}).get("input_tokens", 0)))
    return tokens


async def until_the_refund_waits(client: Client, settings: Settings, cid: str):
    """A turn answered (an order looked up), then a refund that waits for a support lead."""
    request = conversations.conversation_request("support-chat", label="chat")
    await conversations.open_conversation(client, settings, request, cid)
    looked = await conversations.send(
        client, cid, conversations.message("Where is my order A-1001?", by="jane")
    )
    assert looked.status == "answered" and looked.reply.startswith("Done: "), looked
    asked = conversations.message("Please refund A-1001 20.00", by="jane")
    waiting = await conversations.send(client, cid, asked)
    assert waiting.status == "waiting" and "refund_order" in waiting.waiting_for, waiting
    return await key_of(client, cid), asked


async def the_rest_of_the_conversation(client: Client, cid: str, asked) -> list[str]:
    """The refund's reply, one more turn, and the close: the replies."""
    refunded = await asyncio.wait_for(
        conversations.await_reply(client, cid, asked.message_id), timeout=240
    )
    thanks = await asyncio.wait_for(
        conversations.send(client, cid, conversations.message("Thanks, that is all", by="jane")),
        timeout=240,
    )
    await conversations.close(client, cid, Actor(by="jane"))
    result = await asyncio.wait_for(runs.wait_result(client, cid), timeout=120)
    assert result.status == "completed", result
    return [refunded.reply or "", thanks.reply or ""]


def assert_whole(inputs: list[int]) -> None:
    """Five model calls (look-up, its reply, the refund's call, its reply, the thanks),
    each asked with the whole thread so far: more input than the one before."""
    assert len(inputs) == 5, inputs
    assert all(later > earlier for earlier, later in itertools.pairwise(inputs)), inputs


async def test_separate_sqlite_stores_the_survivor_is_never_handed_the_run(
    dev_env, settings, model_server, tmp_path
):
    client, cid = dev_env.client, f"chat-{uuid.uuid4().hex[:8]}"
    first = settings.model_copy(update={"data_dir": tmp_path / "a"})
    second = settings.model_copy(update={"data_dir": tmp_path / "b"})
    a = await started(client, first, tmp_path / "a.log")
    b = back = None
    try:
        key, asked = await until_the_refund_waits(client, first, cid)
        before = served(model_server, key)
        b = await started(client, second, tmp_path / "b.log")
        stop(a, signal.SIGKILL)
        await runs.decide(client, cid, DecideRequest(approve=True, by="support-lead"))

        # The tool call waits on the queue of A's store, which the run learned.
        a_queue = (await runs.get_state(client, cid)).store_queue
        assert a_queue == store_queue(first.task_queue, open_database(first))
        assert await eventually(lambda: waiting_on(client, cid), within=60) == (
            "run_tool",
            a_queue,
        )
        await asyncio.sleep(3)  # B is handed nothing: no refund, no model call, nothing written
        assert await refusal(client, cid) is None
        assert await waiting_on(client, cid) == ("run_tool", a_queue)
        assert served(model_server, key) == before
        assert count_effects(first, key, "refund") + count_effects(second, key, "refund") == 0
        assert TranscriptStore(open_database(second)).rows_of(key) == 0

        back = await started(client, first, tmp_path / "a-back.log")
        refunded, thanks = await the_rest_of_the_conversation(client, cid, asked)
    finally:
        for worker in (a, b, back):
            stop(worker)
    assert refunded.startswith("Done: ") and "refunded" in refunded
    assert thanks == "You said: Thanks, that is all"
    assert count_effects(first, key, "refund") == 1 and count_effects(second, key, "refund") == 0
    # B never wrote a row of the run, so it never built a request from half of it.
    assert TranscriptStore(open_database(second)).rows_of(key) == 0
    assert_whole(await model_inputs(client, cid))
    answered = served(model_server, key)
    assert len(answered) == len(set(answered)) == 5  # nothing asked twice


@pytest.fixture
def shared_postgres() -> Iterator[dict[str, str]]:
    url, schema = postgres_or_skip(), f"t_{uuid.uuid4().hex[:12]}"
    yield {"AGENT_DATABASE_URL": url, "AGENT_DATABASE_SCHEMA": schema}
    drop_schema(url, schema)


async def test_one_shared_postgres_store_the_survivor_finishes(
    dev_env, settings, model_server, tmp_path, shared_postgres
):
    client, cid = dev_env.client, f"chat-{uuid.uuid4().hex[:8]}"
    first = settings.model_copy(update={"data_dir": tmp_path / "a"})
    second = settings.model_copy(update={"data_dir": tmp_path / "b"})
    a = await started(client, first, tmp_path / "a.log", **shared_postgres)
    b = None
    try:
        key, asked = await until_the_refund_waits(client, first, cid)
        b = await started(client, second, tmp_path / "b.log", **shared_postgres)
        stop(a, signal.SIGKILL)
        await runs.decide(client, cid, DecideRequest(approve=True, by="support-lead"))
        refunded, thanks = await the_rest_of_the_conversation(client, cid, asked)
    finally:
        for worker in (a, b):
            stop(worker)
    assert refunded.startswith("Done: ") and "refunded" in refunded
    assert thanks == "You said: Thanks, that is all"
    # The survivor made the refund (the providers' journal is under its data dir), once.
    assert count_effects(first, key, "refund") == 0 and count_effects(second, key, "refund") == 1
    assert_whole(await model_inputs(client, cid))
    answered = served(model_server, key)
    assert len(answered) == len(set(answered)) == 5
