"""Start and steer runs from Python: what `agentctl` itself uses.

    client = await AgentClient.connect()
    run = await client.start("invoice", "Pay invoice INV-1001")
    request = await run.next_approval()
    await run.approve(request.request_id, by="alice")
    result = await run.result()

Every method raises `RunError` with a one-line reason when the run cannot do what is
asked (unknown agent, closed run, a decision refused by the run's policy).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Literal, TypeVar, Unpack

from pydantic import BaseModel
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError

from durable_agents.activities.memory import MemoryRecord
from durable_agents.control import (
    conversations,
    memory,
    runs,
    schedules,
    timeline,
    whatif,
    whatif_record,
)
from durable_agents.control.agents import checked_request, local_agents, start_options
from durable_agents.control.memory import ForgetReport
from durable_agents.control.runs import RunError
from durable_agents.control.schedules import ScheduleInfo
from durable_agents.control.whatif import Variant
from durable_agents.control.whatif_report import Grader, WhatIfReport
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import Settings, load_settings
from durable_agents.workflows.agents import Agent
from durable_agents.workflows.contracts import (
    RunBudget,
    RunRequest,
    RunResult,
)
from durable_agents.workflows.conversation_records import ConversationView, TurnRecord, TurnReply
from durable_agents.workflows.output import NoAnswer, answer_of
from durable_agents.workflows.people_inputs import Actor, Answer, DecideRequest, StatePatch
from durable_agents.workflows.records import ApprovalRequest, Question
from durable_agents.workflows.registry import AgentRegistry
from durable_agents.workflows.run_summary import RunSummary
from durable_agents.workflows.start_options import StartFields, StartOptions, conversation_title
from durable_agents.workflows.state import RunState

T = TypeVar("T")
AnswerT = TypeVar("AnswerT", bound=BaseModel)

__all__ = [
    "AgentClient",
    "AgentRegistry",
    "ApprovalRequest",
    "Conversation",
    "ConversationView",
    "ForgetReport",
    "MemoryRecord",
    "Question",
    "RunError",
    "RunHandle",
    "RunResult",
    "RunState",
    "RunSummary",
    "ScheduleInfo",
    "StartOptions",
    "StatePatch",
    "TurnRecord",
    "TurnReply",
]


class AgentClient:
    """A connection to Temporal and the task queue the workers serve."""

    def __init__(
        self, temporal: Client, settings: Settings, agents: AgentRegistry | None = None
    ) -> None:
        self.temporal = temporal
        self.settings = settings
        # What `start` checks an agent name against (default: this process's AGENT_MODULES).
        self.agents = agents

    @classmethod
    async def connect(
        cls, settings: Settings | None = None, agents: AgentRegistry | None = None
    ) -> AgentClient:
        settings = settings or load_settings()
        return cls(await connect(settings), settings, agents)

    async def start(
        self,
        agent: str | Agent,
        goal: str,
        *,
        run_id: str | None = None,
        **options: Unpack[StartFields],
    ) -> RunHandle:
        """Start a run of `agent` (or attach to the same request already running under
        `run_id`). An unknown agent or an invalid request is refused before anything starts.
        The options (durable_agents.StartOptions): policy, limits and budget default to the
        agent's own; `subject` says what the run is about (`{"customer": "jane"}`), which an
        agent with memory keeps its memories by; `label` travels with each model call."""
        request = self._request(agent, goal, options)
        started = await runs.start_run(self.temporal, self.settings, request, run_id)
        return RunHandle(self.temporal, started.run_id, attached=started.attached)

    def _request(
        self,
        agent: str | Agent,
        goal: str,
        options: StartFields,
        *,
        conversation: bool = False,
    ) -> RunRequest:
        registry = self.agents or local_agents()
        return checked_request(
            registry, agent, goal, start_options(**options), conversation=conversation
        )

    async def what_if(
        self,
        run_ids: Sequence[str] = (),
        *,
        variant: Variant = Variant(),
        agent: str | None = None,
        closed_within: timedelta | None = None,
        query: str | None = None,
        history_files: Sequence[Path] = (),
        limit: int = 100,
        graders: Sequence[Grader] = (),
        read_only: Literal["recorded", "live"] = "recorded",
        unmatched: Literal["approve", "reject", "stop"] = "approve",
        progress: Callable[[str], None] | None = None,
    ) -> WhatIfReport:
        """Play recorded runs again as shadows of `variant` (durable_agents/whatif.py):
        the runs named, those in `history_files`, and the closed runs of `agent` (within
        `closed_within`, matching the visibility `query`). No tool with effects is called;
        the report is kept for the console's /whatif page too."""
        # The what-if worker: imported here, so a client that never asks a what-if does
        # not load the worker's activities.
        from durable_agents.worker.shadow import build_shadow_worker

        # Every argument checked before any history is read.
        options = whatif.WhatIfOptions(read_only=read_only, unmatched=unmatched)
        matching = whatif_record.Matching(agent, closed_within, query, limit)
        if not isinstance(variant, Variant):
            raise RunError("variant is a durable_agents.whatif.Variant")
        with timeline.replaying_with(self.agents):  # the recorded runs, with our agents
            recorded = await whatif_record.recorded_runs(
                self.temporal,
                self.settings,
                run_ids=run_ids,
                files=history_files,
                matching=matching,
                skipped=progress or (lambda line: None),
            )
        report = await whatif.what_if(
            self.temporal,
            self.settings,
            recorded,
            variant,
            build_shadow_worker,
            graders=graders,
            options=options,
            say=progress or (lambda line: None),
            known=self.agents,
        )
        whatif.keep_report(self.settings, report)
        return report

    async def open_conversation(
        self,
        agent: str | Agent,
        conversation_id: str | None = None,
        *,
        title: str | None = None,
        **options: Unpack[StartFields],
    ) -> Conversation:
        """Open a conversation with `agent`, or resume the one running under
        `conversation_id` (opened with the same agent and settings). It lasts until closed:
        send it messages, each answered by a turn of the agent's tool loop."""
        name = agent.name if isinstance(agent, Agent) else agent
        goal = title or conversation_title(name)
        request = self._request(agent, goal, options, conversation=True)
        started = await conversations.open_conversation(
            self.temporal, self.settings, request, conversation_id
        )
        return Conversation(self.temporal, started.run_id, attached=started.attached)

    def conversation(self, conversation_id: str) -> Conversation:
        """A handle on an existing conversation."""
        return Conversation(self.temporal, runs.check_run_id(conversation_id))

    async def create_schedule(
        self,
        name: str,
        agent: str | Agent,
        goal: str,
        *,
        cron: list[str] | None = None,
        every: timedelta | None = None,
        overlap: schedules.Overlap = "skip",
        **options: Unpack[StartFields],
    ) -> ScheduleInfo:
        """Run `agent` on `goal` at each cron time (UTC) or interval, as a Temporal Schedule:
        each start is a normal run (id: the name and the time), with the same options as
        `start`. A time that comes while the previous run still runs is skipped, unless
        `overlap` says otherwise."""
        request = self._request(agent, goal, options)
        return await schedules.create(
            self.temporal, self.settings, name, request, cron=cron, every=every, overlap=overlap
        )

    async def schedules(self) -> list[ScheduleInfo]:
        return await schedules.list_all(self.temporal)

    async def pause_schedule(self, name: str, note: str = "") -> None:
        await schedules.pause(self.temporal, name, note)

    async def unpause_schedule(self, name: str, note: str = "") -> None:
        await schedules.unpause(self.temporal, name, note)

    async def trigger_schedule(self, name: str) -> None:
        await schedules.trigger(self.temporal, name)

    async def delete_schedule(self, name: str) -> None:
        await schedules.delete(self.temporal, name)

    def memories(self, namespace: str, limit: int = 100) -> list[MemoryRecord]:
        """A namespace's memories, newest first, each with the run and step that wrote it
        (from the stores, where this machine reaches them)."""
        return memory.listing(self.settings, namespace, limit)

    def forget_memories(self, namespace: str, memory_ids: list[str]) -> list[str]:
        """Forget some of a namespace's memories: the ids removed. Runs that recalled them
        keep their copies until pruned; `forget_subject` clears those too."""
        return memory.forget(self.settings, namespace, memory_ids)

    async def forget_subject(self, namespace: str) -> ForgetReport:
        """Forget every memory of a namespace and every copy kept outside Temporal (the
        stored transcripts and live logs of the closed runs that used them, the what-if
        reports naming those runs); the report says what went and what stays."""
        return await memory.forget_subject(self.temporal, self.settings, namespace)

    def run(self, run_id: str) -> RunHandle:
        """A handle on an existing run."""
        return RunHandle(self.temporal, runs.check_run_id(run_id))


class RunHandle:
    """One run: read its state, decide on its approvals, answer it, pause, resume, cancel."""

    def __init__(self, temporal: Client, run_id: str, *, attached: bool = False) -> None:
        self.temporal = temporal
        self.run_id = run_id
        self.attached = attached  # True when `start` joined a run already going

    async def state(self) -> RunState:
        return await runs.get_state(self.temporal, self.run_id)

    async def summary(self) -> RunSummary:
        return await runs.get_summary(self.temporal, self.run_id)

    async def next_approval(self, within: float = 60.0) -> ApprovalRequest:
        """The first approval the run waits for, once it waits for one."""
        return await self._wait_for(lambda s: next(iter(s.pending_approvals), None), within)

    async def next_question(self, within: float = 60.0) -> Question:
        """The first question the run waits to have answered, once it asks one."""
        return await self._wait_for(lambda s: next(iter(s.pending_questions), None), within)

    async def next_sub_agent(self, within: float = 60.0) -> RunHandle:
        """The run of the first sub-agent this run delegated to, once it has."""
        child = await self._wait_for(
            lambda s: s.delegations[0].child_id if s.delegations else None, within
        )
        return RunHandle(self.temporal, child)

    async def _wait_for(self, pick: Callable[[RunSummary], T | None], within: float) -> T:
        async with asyncio.timeout(within):
            while True:
                summary = await self.summary()
                found = pick(summary)
                if found is not None:
                    return found
                if summary.status.is_closed:
                    raise RunError(f"run {self.run_id} is {summary.status.value}; nothing waits")
                await asyncio.sleep(0.2)

    async def approve(self, request_id: str | None = None, *, by: str, comment: str = "") -> str:
        return await self._decide(request_id, True, by, comment)

    async def reject(self, request_id: str | None = None, *, by: str, comment: str = "") -> str:
        return await self._decide(request_id, False, by, comment)

    async def _decide(self, request_id: str | None, approve: bool, by: str, comment: str) -> str:
        request = DecideRequest(request_id=request_id, approve=approve, by=by, comment=comment)
        return await runs.decide(self.temporal, self.run_id, request)

    async def answer(self, text: str, *, by: str, question_id: str | None = None) -> str:
        reply = Answer(question_id=question_id, answer=text, by=by)
        return await runs.answer(self.temporal, self.run_id, reply)

    async def pause(self, *, by: str, reason: str = "") -> None:
        await runs.pause(self.temporal, self.run_id, Actor(by=by, reason=reason))

    async def resume(self, *, by: str, reason: str = "") -> None:
        await runs.resume(self.temporal, self.run_id, Actor(by=by, reason=reason))

    async def cancel(self, *, by: str, reason: str = "") -> None:
        await runs.cancel(self.temporal, self.run_id, Actor(by=by, reason=reason))

    async def raise_budget(
        self,
        *,
        by: str,
        usd: float | None = None,
        tokens: int | None = None,
        tool_calls: int | None = None,
        seconds: float | None = None,
        comment: str = "",
    ) -> RunBudget:
        """Set the run's budget (limits left out stay as they are). A run waiting at its
        budget goes on; the sub-agent it waits on gets what is left. To stop it: `reject`."""
        raise_ = runs.budget_raise(
            by, usd=usd, tokens=tokens, tool_calls=tool_calls, seconds=seconds, comment=comment
        )
        return await runs.raise_budget(self.temporal, self.run_id, raise_)

    async def edit(self, patch: StatePatch) -> RunState:
        """Apply an edit; the run's state after it (its kept events left out: `state()`
        has them)."""
        return await runs.edit(self.temporal, self.run_id, patch)

    async def result(self) -> RunResult:
        """Wait for the run to end: its status, final answer and the effects it performed
        (a failed or cancelled run is a result too, with its status and error)."""
        try:
            return await runs.wait_result(self.temporal, self.run_id)
        except WorkflowFailureError as err:
            cause = err.cause
            if isinstance(cause, CancelledError):
                return RunResult(run_id=self.run_id, status="cancelled")
            message = getattr(cause, "message", None) or str(cause or err)
            return RunResult(run_id=self.run_id, status="failed", error=message)

    async def output(self, output_type: type[AnswerT]) -> AnswerT:
        """Wait for the run to end: its answer as `output_type` (the agent's declared
        answer type, `Agent(output_type=...)`), or RunError saying why there is none."""
        try:
            return answer_of(await self.result(), output_type, self.run_id)
        except NoAnswer as err:
            raise RunError(str(err)) from None


class Conversation(RunHandle):
    """A conversation: a run that answers messages. Everything a run handle does (approve,
    pause, cancel, state...) works on it too.

        chat = await client.open_conversation("support", "chat-alice")
        reply = await chat.send("Where is order A-1?", by="alice")
        if reply.status == "waiting":          # the turn stopped for an approval
            await chat.approve(by="bob")
            reply = await chat.reply(reply.message_id)
        print(reply.reply)
    """

    async def send(self, text: str, *, by: str, message_id: str | None = None) -> TurnReply:
        """Send a message; returns when its turn ends (`answered` or `failed`) or stops
        for a person (`waiting`, `waiting_for` names what). Sending again with the same
        `message_id` is the same message: one turn, one reply."""
        sent = conversations.message(text, by=by, message_id=message_id)
        return await conversations.send(self.temporal, self.run_id, sent)

    async def post(self, text: str, *, by: str, message_id: str | None = None) -> str:
        """Send a message without waiting for its reply (it is queued, in order); returns
        its id, for `reply` later. The reply also comes on the run's events."""
        sent = conversations.message(text, by=by, message_id=message_id)
        await conversations.post(self.temporal, self.run_id, sent)
        return sent.message_id

    async def reply(self, message_id: str, *, by: str = "anonymous") -> TurnReply:
        """Wait again for a message's reply (after deciding what its turn waited for), as
        `by`: one sender may wait on a few replies at once, not on every place."""
        return await conversations.await_reply(self.temporal, self.run_id, message_id, by=by)

    async def thread(self) -> ConversationView:
        """The thread's recent turns, the messages queued and what the current turn waits
        for."""
        return await conversations.thread(self.temporal, self.run_id)

    async def close(self, *, by: str, reason: str = "") -> None:
        """No more messages: those queued are answered, then the conversation completes."""
        await conversations.close(self.temporal, self.run_id, Actor(by=by, reason=reason))
