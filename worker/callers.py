"""Who may call our activities: a run of this deployment, never whoever can schedule one.

Temporal lets any workflow in a namespace schedule any activity type on any task queue: a
twenty-line workflow of anyone's could schedule `run_tool` on ours with a made-up run id
and pay. So every activity of ours checks its caller before it acts (an activity
interceptor the plugin adds to the worker):

- the calling workflow is of the type that calls that activity (the agent workflow, or
  the prune workflow for pruning);
- that run lives on the task queue the activity was scheduled on, the one this worker
  serves (Temporal's own record of the run, asked once per run and kept);
- a run started as a child (a sub-agent) was started by a workflow on that same queue,
  and a continued run continued from a run of ours (each shown by Temporal: a run it no
  longer shows is a refusal, never "checked back then");
- the run identity the input names (`run_id`, or a transcript copy's `to_run_id`) is the
  calling run's own: its workflow id, and the first run id of its chain; a step's input
  that names none (activity_io.OWN_RUN) is given that identity here, from the record;
- on a what-if worker, the run (or the root of its sub-agent tree) is one the what-if
  started itself (`admits`).

A refusal is non-retryable, says why in one line and happens before the activity acts.
Local activities are exempt: only the worker running the workflow task can run them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import temporalio.client
import temporalio.worker
from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.workflows.activity_io import OWN_RUN, RUN_TAG, run_tag
from durable_agents.workflows.beginnings import RETENTION_ADVICE
from durable_agents.workflows.records import IDENTITY_SEPARATOR

AGENT_WORKFLOW = "AgentWorkflow"
# Each activity of ours and the one workflow type that calls it.
CALLED_BY: dict[str, str] = {
    "call_model": AGENT_WORKFLOW,
    "run_tool": AGENT_WORKFLOW,
    "call_mcp_tool": AGENT_WORKFLOW,
    "list_mcp_tools": AGENT_WORKFLOW,
    "evaluate_call": AGENT_WORKFLOW,
    "copy_transcript": AGENT_WORKFLOW,
    "await_run": AGENT_WORKFLOW,
    "child_spend": AGENT_WORKFLOW,
    "fork_origin": AGENT_WORKFLOW,
    "parent_state_at": AGENT_WORKFLOW,
    "resolve_agent": AGENT_WORKFLOW,
    "scheduled_run": AGENT_WORKFLOW,
    "run_origin": AGENT_WORKFLOW,
    "claim_signature": AGENT_WORKFLOW,
    "prune_stored_runs": "PruneWorkflow",
}
# Activities that act on the world: their input must name its run (never OWN_RUN).
NAME_THEIR_RUN = frozenset({"run_tool", "call_mcp_tool"})
# Runs whose facts are kept: a run's queue, chain and parent never change.
KEPT_RUNS = 4096
REFUSED = "CallerRefused"


@dataclass(frozen=True)
class RunFacts:
    """What Temporal says of a run: where it runs, its chain, who started it."""

    workflow_type: str
    task_queue: str
    first_run_id: str
    parent: tuple[str, str] | None  # (workflow id, run id)
    # The run this one continued as new from (None: the chain's first).
    continued_from: str | None


# Whether a what-if started this root run (workflow id, run id) itself.
Admits = Callable[[str, str], Awaitable[bool]]


class CallerCheck(temporalio.worker.Interceptor):
    """Refuses an activity of ours called by anything but a run of this deployment."""

    def __init__(self, client: temporalio.client.Client, admits: Admits | None = None) -> None:
        self.client = client
        self.admits = admits
        self._facts: OrderedDict[tuple[str, str], RunFacts] = OrderedDict()

    def intercept_activity(
        self, next: temporalio.worker.ActivityInboundInterceptor
    ) -> temporalio.worker.ActivityInboundInterceptor:
        return _Checked(next, self)

    async def refusal(self, info: activity.Info, args: Any) -> str | None:
        """Why this call may not run, or None."""
        wanted = CALLED_BY.get(info.activity_type)
        if wanted is None or info.is_local:
            return None
        if info.workflow_type != wanted:
            return f"{info.activity_type} is called only by {wanted}, not {info.workflow_type}"
        workflow_id, run_id = info.workflow_id or "", info.workflow_run_id or ""
        facts = await self.facts(workflow_id, run_id)
        if facts is None:
            return f"Temporal knows no run {workflow_id} ({run_id})"
        if facts.task_queue != info.task_queue:
            return (
                f"run {workflow_id} runs on task queue {facts.task_queue!r}, not on "
                f"{info.task_queue!r} that this worker serves"
            )
        broken = await self._foreign_link(workflow_id, facts, wanted, info.task_queue)
        if broken is not None:
            return broken
        if (foreign := await self._foreign_parent(workflow_id, facts, info.task_queue)) is not None:
            return foreign
        named = _run_named(args)
        if named == OWN_RUN and info.activity_type in NAME_THEIR_RUN:
            # A sealed input of another run, copied into this one's task, would be filled
            # in with this run's identity and act again under a new idempotency key.
            return f"{info.activity_type}'s input names no run (runs name theirs since 2026-12)"
        own = f"{workflow_id}{IDENTITY_SEPARATOR}{facts.first_run_id}"
        if named is not None and named.startswith(RUN_TAG):
            if not facts.first_run_id or named != run_tag(own):
                return f"the input is tagged for another run than {workflow_id} ({named})"
        elif named not in (None, OWN_RUN) and not _is_own(named, workflow_id, facts.first_run_id):
            return f"the input names run {named!r}, not the calling run {workflow_id}"
        if self.admits is not None and not await self._admitted(workflow_id, run_id, facts):
            return f"run {workflow_id} was not started by this what-if"
        return None

    async def own_identity(self, info: activity.Info, arg: Any) -> Any:
        """The input with the calling run's own identity as the run it names (it named
        activity_io.OWN_RUN): the workflow id and its chain's first run id, as Temporal
        records them (checked and kept by `refusal`, just before)."""
        workflow_id, run_id = info.workflow_id or "", info.workflow_run_id or ""
        facts = await self.facts(workflow_id, run_id)
        if facts is None or not facts.first_run_id or not isinstance(arg, BaseModel):
            raise ApplicationError(
                f"refused: run {workflow_id} has no identity Temporal shows",
                type=REFUSED,
                non_retryable=True,
            )
        identity = f"{workflow_id}{IDENTITY_SEPARATOR}{facts.first_run_id}"
        return arg.model_copy(update={"run_id": identity})

    async def facts(self, workflow_id: str, run_id: str) -> RunFacts | None:
        key = (workflow_id, run_id)
        if key in self._facts:
            self._facts.move_to_end(key)
            return self._facts[key]
        try:
            described = await self.client.get_workflow_handle(workflow_id, run_id=run_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        parent = None
        if described.parent_id:
            parent = (described.parent_id, described.parent_run_id or "")
        handle = self.client.get_workflow_handle(workflow_id, run_id=described.run_id)
        first = await anext(aiter(handle.fetch_history_events(page_size=1)))
        started = first.workflow_execution_started_event_attributes
        facts = RunFacts(
            described.workflow_type,
            described.task_queue,
            described.raw_info.first_run_id,
            parent,
            started.continued_execution_run_id or None,
        )
        self._facts[key] = facts
        if len(self._facts) > KEPT_RUNS:
            self._facts.popitem(last=False)
        return facts

    async def _foreign_link(
        self, workflow_id: str, facts: RunFacts, wanted: str, task_queue: str
    ) -> str | None:
        """Why the run's continue-as-new link is not ours: a workflow of anyone's may
        continue as new into ours, carrying a state of its own making. The run it continued
        from must be of the same type, on the same queue; that run was itself admitted
        when it began (workflows/admission.py), so its own link was checked then. A run
        Temporal no longer shows is a refusal, never "checked back then"."""
        earlier = facts.continued_from
        if earlier is None:
            return None
        found = await self.facts(workflow_id, earlier)
        if found is None:
            return (
                f"run {workflow_id} continued from run {earlier}, which Temporal no longer "
                f"shows: {RETENTION_ADVICE}"
            )
        if (found.workflow_type, found.task_queue) != (wanted, task_queue):
            return (
                f"run {workflow_id} continued as new from a {found.workflow_type} on "
                f"{found.task_queue!r}, not from a run of this deployment"
            )
        return None

    async def _foreign_parent(
        self, workflow_id: str, facts: RunFacts, task_queue: str
    ) -> str | None:
        """Why the run's parent is not of this deployment: a sub-agent takes its policy and
        memory namespace from the run that started it, so a workflow of anyone's on a queue
        of their own must not be that run, nor one Temporal no longer shows. A parent on
        this queue runs on our workers (an agent run, or a team's own workflow calling
        `run_agent`)."""
        if facts.parent is None:
            return None
        parent = await self.facts(*facts.parent)
        if parent is None:
            return (
                f"run {workflow_id} was started by {facts.parent[0]}, which Temporal no "
                f"longer shows: {RETENTION_ADVICE}"
            )
        if parent.task_queue == task_queue:
            return None
        return (
            f"run {workflow_id} was started by a {parent.workflow_type} on "
            f"{parent.task_queue!r}, not by a run of this deployment"
        )

    async def _admitted(self, workflow_id: str, run_id: str, facts: RunFacts) -> bool:
        """The root of the run's tree (a shadow's sub-agents are its children) is one the
        what-if started: its chain's first run, so a shadow that continued as new is
        still its own."""
        for _ in range(100):  # a tree deeper than this is no what-if's
            if facts.parent is None:
                assert self.admits is not None
                return await self.admits(workflow_id, facts.first_run_id or run_id)
            workflow_id, run_id = facts.parent
            found = await self.facts(workflow_id, run_id)
            if found is None:
                return False
            facts = found
        return False


class _Checked(temporalio.worker.ActivityInboundInterceptor):
    def __init__(self, next: temporalio.worker.ActivityInboundInterceptor, check: CallerCheck):
        super().__init__(next)
        self.check = check

    async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
        info = activity.info()
        why = await self.check.refusal(info, input.args[0] if input.args else None)
        if why is not None:
            activity.logger.warning("refused %s: %s", info.activity_type, why)
            raise ApplicationError(f"refused: {why}", type=REFUSED, non_retryable=True)
        named = _run_named(input.args[0]) if input.args else None
        if named is not None and (named == OWN_RUN or named.startswith(RUN_TAG)):
            input.args = [await self.check.own_identity(info, input.args[0]), *input.args[1:]]
        return await self.next.execute_activity(input)


def _run_named(arg: Any) -> str | None:
    """The run identity an activity's input says it acts for."""
    for name in ("to_run_id", "run_id"):
        value = getattr(arg, name, None)
        if isinstance(value, str):
            return value
    return None


def _is_own(named: str, workflow_id: str, first_run_id: str) -> bool:
    """A store key is `workflow id@first run id`, or the workflow id alone (runs from
    before the identity): either way it must be the calling chain's."""
    if named == workflow_id:
        return True
    chain = f"{workflow_id}{IDENTITY_SEPARATOR}"
    return named.startswith(chain) and (not first_run_id or named == chain + first_run_id)
