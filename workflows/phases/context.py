"""The run context every phase is handed: the run's state and recorded agent, the Web UI's
view of it (publishing), its timeline (moments), the deadline of a wait for a person,
signals sent for later, spend reports, and how a run fails. It keeps only what more than
one part uses (tests/workflows/test_phase_parts.py counts the users of each member); what
one part alone needs lives in that part.

The phases are objects built from this context and from one another, wired by the
workflow class (AgentWorkflow._wire; docs/architecture.md draws them), so each can be
built and tested alone, and reaches only what it was handed.
Deterministic code only, like all of workflows/.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
)

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from durable_agents.workflows import patches, signing, timeline
    from durable_agents.workflows import search_attributes as sa
    from durable_agents.workflows.activity_io import run_tag
    from durable_agents.workflows.agent_records import AgentRecord
    from durable_agents.workflows.agents import BEFORE_AGENTS, Agent
    from durable_agents.workflows.beginnings import own_identity
    from durable_agents.workflows.contract_base import preview
    from durable_agents.workflows.contracts import ChildSpend, RunRequest
    from durable_agents.workflows.event_kinds import PUBLISHED_AT, EventKind
    from durable_agents.workflows.memory import MEMORY_TOOLS
    from durable_agents.workflows.packing import pack_state
    from durable_agents.workflows.people_inputs import Actor
    from durable_agents.workflows.registry import AgentRegistry, served
    from durable_agents.workflows.run_summary import progress_line, waiting_for
    from durable_agents.workflows.start_options import StartOptions
    from durable_agents.workflows.state import RunState, trim_for_a_long_life
    from durable_agents.workflows.tools import (
        ASK_HUMAN,
        COMPLETE_STEP,
    )


# Who decided when no person did before a deadline.
DEADLINE_ACTOR = "deadline"
# The signal a sub-agent's run reports its spend with (AgentWorkflow.child_spent).
CHILD_SPENT = "child_spent"


class RunFailed(Exception):
    """A rule of the run was broken (no plan, a step that never ends): the run fails."""


class RunStopped(Exception):
    """People stopped the run where it asked them to let it go on (at its budget): the
    cancel is requested in their name, and the run ends cancelled (AgentWorkflow.
    _end_of_story), as when they cancel it."""

    def __init__(self, actor: Actor) -> None:
        super().__init__(actor.reason)
        self.actor = actor


# The patches every run's opening asks, which a new run takes on the one OPENING marker.
OPENING_PATCHES = (
    patches.RUN_IDENTITY,
    patches.AGENT_RECORD,
    patches.STEP_WITH_STATUS,
    patches.PEOPLE_CHECKED,
)


class RunContext:
    """The run's state and the bookkeeping every phase shares; each attribute here is the
    context's own, and a phase reaches the run only through it."""

    def __init__(self, state: RunState, *, opened_in_one: bool = False) -> None:
        # The state whole, decided before the context (fresh, carried or forked), never
        # replaced; each part is handed the records it uses (AgentWorkflow._wire).
        self._state = state
        # What was last upserted as search attributes (before `step-published-with-status`).
        self._published: tuple[str, int, str] | None = None
        self.signatures_settled = False  # patches.EVERY_CHANGE_SIGNED, asked once
        self._step_with_status: bool | None = None  # patches.STEP_WITH_STATUS, asked once
        # patches.OPENING (asked by the workflow before any other patch): the opening's
        # patches on one marker.
        self._opened_in_one = opened_in_one
        # The sub-agent's run this run waits on now (pause, resume, cancel, budget reach it).
        self._identity_named = False  # this Temporal run's first model call named it
        self.active_child: str | None = None
        # Signals sent and not yet delivered (spend reports, forwarded pauses).
        self._sending: set[asyncio.Task[None]] = set()

    def trim_for_a_long_life(self) -> None:
        """Before a conversation's continue-as-new: every record keeps its latest only."""
        trim_for_a_long_life(self._state)

    def continued_request(self) -> RunRequest:
        """The next run of the chain: the state whole, packed, with every start option as
        the run settled it (an option added is carried)."""
        return RunRequest(
            goal=self._state.goal,
            agent=self.agent.name,
            conversation=self._state.conversation is not None,
            resume_state_packed=pack_state(self._state, by_run=workflow.info().run_id),
            **StartOptions.fields_of(self._state),
        )

    def run_named(self, *, model_call: bool = False) -> str:
        """The run a step's input names (activity_io.run_tag): its store key where that is
        not the run's own identity, or on the first model call of this Temporal run; else
        its tag. A sealed input is the deployment's but not bound to a run: copied into
        another run's task, it names a run that is not the caller's, and the worker's
        caller check refuses it."""
        key = self._state.store_key
        if key != own_identity(workflow.info()):
            return key
        if model_call and not self._identity_named:
            self._identity_named = True
            return key
        return run_tag(key)

    def registry(self) -> AgentRegistry:
        return served(workflow.info().task_queue)

    @property
    def agent(self) -> AgentRecord:
        """The run's recorded agent; runs from before agents existed record theirs now."""
        if self._state.agent is None:
            self._state.terms.record_agent(self.registry().agent(BEFORE_AGENTS).record())
        assert self._state.agent is not None
        return self._state.agent

    def agent_code(self) -> Agent:
        return self.registry().agent(self.agent.name)

    def step_tools(self) -> tuple[str, ...]:
        own = tuple(t.name for t in self.agent.tools)
        if self._state.memory_namespace is None and self.agent.memory is not None:
            # Memory is optional for this agent, and this run's subject names too little.
            own = tuple(name for name in own if name not in MEMORY_TOOLS)
        if self.agent.planning:
            return (COMPLETE_STEP, ASK_HUMAN, *own)
        return (ASK_HUMAN, *own)

    def fail(self, err: BaseException) -> NoReturn:
        reason = failure_reason(err)
        self._state.lifecycle.fail(reason, workflow.now())
        self.moment(EventKind.FAILED, reason)
        raise ApplicationError(reason, type="AgentRunFailed", non_retryable=True) from err

    def opening_patched(self, patch_id: str) -> bool:
        """One of the opening's patches: yes without a marker of its own in a run opened
        on `OPENING`, else asked as before."""
        assert patch_id in OPENING_PATCHES, patch_id
        return self._opened_in_one or workflow.patched(patch_id)

    def publish(self) -> None:
        """Keep the Web UI's current details and our search attributes in step with the state."""
        workflow.set_current_details(progress_line(self._state))
        wanted = (self._state.status.value, self._state.current_step or 0, waiting_for(self._state))
        if self._step_with_status is None:
            self._step_with_status = self.opening_patched(patches.STEP_WITH_STATUS)
        if self._step_with_status:
            self._publish_with_status(*wanted)
            return
        before = self._published
        if wanted == before:
            return
        self._published = wanted
        # Only what changed: most steps move the step number alone, one payload, not three.
        status, step, waited = before or (None, None, None)
        updates: list[SearchAttributeUpdate[Any]] = []
        if wanted[0] != status:
            updates.append(sa.STATUS.value_set(wanted[0]))
        if wanted[1] != step:
            updates.append(sa.STEP.value_set(wanted[1]))
        if wanted[2] != waited:
            updates.append(sa.WAITING_FOR.value_set(wanted[2]))
        workflow.upsert_search_attributes(updates)

    def _publish_with_status(self, status: str, step: int, waiting_for: str) -> None:
        """Upsert only when the status or what the run waits for changed (what `list`, the
        inbox and the Web UI filter on), with the step of that moment in the same upsert:
        one action per change, none per step. Compared with the attributes the run has
        (its start's included), so a run started as planning upserts nothing at first."""
        now = workflow.info().typed_search_attributes
        if status == now.get(sa.STATUS) and waiting_for == (now.get(sa.WAITING_FOR) or ""):
            return
        updates: list[SearchAttributeUpdate[Any]] = []
        if status != now.get(sa.STATUS):
            updates.append(sa.STATUS.value_set(status))
        if waiting_for != (now.get(sa.WAITING_FOR) or ""):
            updates.append(sa.WAITING_FOR.value_set(waiting_for))
        if step != now.get(sa.STEP):
            updates.append(sa.STEP.value_set(step))
        workflow.upsert_search_attributes(updates)

    def moment(self, kind: EventKind, detail: str = "", seq: int | None = None) -> None:
        """A point of the run's timeline: numbered in the state, kept for the event protocol,
        offered for time travel; published first when the rule says so (PUBLISHED_AT)."""
        if kind in PUBLISHED_AT:
            self.publish()
        self._state.moments.reach(kind.value, detail, workflow.now(), seq)
        timeline.offer(self._state, kind.value, detail, seq)

    def refuse(self, by: str, error: str) -> None:
        """A change that did not count: in the audit log and on the timeline."""
        self._state.audit_log.refused(by, error, workflow.now())
        self.moment(EventKind.DECISION_REFUSED, preview(f"{by}: {error}", 120))

    def settle_signatures(self) -> None:
        """Which signatures this run takes (workflows/signing.py), asked once its policy
        requires them: v3 from the `decisions-bound-to-their-moment` patch on, v2 from
        `every-change-signed`, v1 before it."""
        if self.signatures_settled or not self._state.policy.require_signed_decisions:
            return
        self.signatures_settled = True
        if not workflow.patched(patches.EVERY_CHANGE_SIGNED):
            version = 1
        elif workflow.patched(patches.DECISIONS_BOUND):
            version = signing.NEWEST
        else:
            version = 2
        self._state.signatures.settle_version(version)

    def cancel_holds(self) -> bool:
        """Whether a cancel was asked for and must take hold now (asked where it matters)."""
        return self._state.cancel_requested_by is not None and workflow.patched(
            patches.CANCEL_HOLDS
        )

    async def pause_point(self) -> None:
        """Between activities: where a requested pause takes hold, and a cancel whose
        activity finished before it heard of it."""
        if self.cancel_holds():
            raise asyncio.CancelledError()
        if not self._state.pause_requested:
            return
        self._state.lifecycle.enter_pause()
        self.moment(EventKind.PAUSED)
        await workflow.wait_condition(lambda: not self._state.pause_requested)
        self.publish()

    @property
    def decision_timeout(self) -> timedelta:
        return timedelta(seconds=self._state.policy.decision_timeout_seconds)

    def _signal_later(self, run_id: str, name: str, payload: BaseModel) -> None:
        """Signal another run without waiting for it (from a handler, or mid-story)."""
        task = asyncio.create_task(self._signal_quietly(run_id, name, payload))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _signal_quietly(self, run_id: str, name: str, payload: BaseModel) -> None:
        try:
            await workflow.get_external_workflow_handle(run_id).signal(name, payload)
        except Exception as err:  # the other run closed: nothing left to tell it
            workflow.logger.info("signal %s to %s not delivered: %s", name, run_id, err)

    async def signals_sent(self) -> None:
        if self._sending:
            await workflow.wait(list(self._sending))

    def forward(self, name: str, payload: BaseModel) -> None:
        """Pass a person's pause, resume or budget on to the sub-agent this run waits on."""
        if self.active_child is not None:
            self._signal_later(self.active_child, name, payload)

    def report_spend(self) -> None:
        """A sub-agent's run tells its parent it has spent more, after each call: the
        parent reads the spend from this run then, and its budget and views roll it up
        while the child still runs (a parent from before that takes what the report says,
        with the token it gave)."""
        parent = self._state.delegated_by
        if parent is None:
            return
        report = ChildSpend(
            child_id=self._state.run_id, spent=self._state.spent, token=parent.report_token
        )
        self._signal_later(parent.run_id, CHILD_SPENT, report)


def failure_reason(err: BaseException) -> str:
    """The activity's own failure message: the one our activities word for a person."""
    if isinstance(err, ActivityError) and err.cause is not None:
        cause = err.cause
        return preview(getattr(cause, "message", None) or str(cause), 500)
    return preview(str(err), 500)


class Phase:
    """A part of the run: handed the run context, and in its own `__init__` the records
    of the state and the parts it uses (AgentWorkflow._wire shows them in one place), it
    reaches nothing else of the run."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
