"""What if: recorded runs played again by a changed agent, the world held still, and the
difference reported (docs/architecture.md, "What if").

Each recorded run gets a shadow run: the same agent workflow, started with the recorded
run's goal, label and subject and a `ShadowSpec` (workflows/whatif.py), on a what-if task
queue that a worker inside this process serves with the variant's agents and activities
that never act (worker/shadow.py, activities/shadow.py). A conversation's messages are
sent again turn by turn. When every shadow has ended, each is compared with its recorded
run (control/whatif_report.py), graded, and the report kept for the console.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from durable_agents.activities.shadow import ReadOnly, RecordedCall, Recordings
from durable_agents.activities.stores import open_database
from durable_agents.activities.whatif_reports import WhatIfReports
from durable_agents.control import conversations, runs
from durable_agents.control.agents import check_policy, local_agents
from durable_agents.control.errors import one_line
from durable_agents.control.runs import RunError
from durable_agents.control.stored import check_reachable, store_errors
from durable_agents.control.whatif_record import MAX_DEPTH, RecordedRun
from durable_agents.control.whatif_report import (
    Grade,
    Grader,
    RunComparison,
    Side,
    WhatIfReport,
    differences,
    effect_changes,
    grade,
    side,
    totals,
)
from durable_agents.runtime.encryption import keyring_from
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.agents import BEFORE_AGENTS, Agent, Model
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import RunPolicy, RunRequest
from durable_agents.workflows.people_inputs import Actor
from durable_agents.workflows.registry import AgentRegistry
from durable_agents.workflows.rules import Evaluator, Rule
from durable_agents.workflows.start_options import StartOptions
from durable_agents.workflows.state import RunState
from durable_agents.workflows.tools import Tool
from durable_agents.workflows.whatif import WHATIF_QUEUE_PREFIX, Unmatched

# Makes the what-if worker: (client, settings, the variant's agents, the recordings, its
# task queue) -> a worker to run while the shadows do (worker/shadow.py's, in practice).
ShadowWorkers = Callable[
    [Client, Settings, AgentRegistry, Recordings, str], AbstractAsyncContextManager[Any]
]

SHADOW_ACTOR = "what-if"


@dataclass(frozen=True)
class Variant:
    """The agent the recorded runs are played again with: another agent (`agent`), or each
    run's own agent with some of it overridden. Nothing set: the same agent (a what-if of
    an unchanged agent finds no difference and spends no tokens)."""

    agent: Agent | None = None
    instructions: str | None = None
    model: Model | str | None = None
    tools: Sequence[Tool] | None = None
    rules: Sequence[Rule | Evaluator] | None = None
    policy: RunPolicy | None = None

    def __post_init__(self) -> None:
        if self.agent is not None and not isinstance(self.agent, Agent):
            raise RunError("a variant's agent is an Agent")
        if self.instructions is not None and (
            not isinstance(self.instructions, str) or not self.instructions.strip()
        ):
            raise RunError("a variant's instructions are a text, not empty")
        if self.model is not None and not isinstance(self.model, str | Model):
            raise RunError("a variant's model is a model name or a Model")

    def agent_for(self, recorded: Agent | None) -> Agent:
        base = self.agent or recorded
        if base is None:
            raise RunError("no agent to play the runs with: name one (--agent MODULE:NAME)")
        changes: dict[str, Any] = {}
        if self.instructions is not None:
            changes["instructions"] = self.instructions
        if self.model is not None:
            changes["model"] = self.model
        if self.tools is not None:
            changes["tools"] = tuple(self.tools)
        if self.rules is not None:
            changes["rules"] = tuple(self.rules)
        if self.policy is not None:
            changes["policy"] = self.policy
        return dataclasses.replace(base, **changes) if changes else base

    def describe(self) -> str:
        parts = [f"agent {self.agent.name}"] if self.agent is not None else []
        if self.instructions is not None:
            parts.append(f"instructions {preview(self.instructions, 60)!r}")
        if self.model is not None:
            name = self.model if isinstance(self.model, str) else self.model.name
            parts.append(f"model {name}")
        if self.tools is not None:
            parts.append(f"tools {', '.join(t.name for t in self.tools) or 'none'}")
        if self.rules is not None:
            parts.append(f"{len(self.rules)} rules")
        if self.policy is not None:
            parts.append("its own policy")
        return "; ".join(parts) or "the same agent"


@dataclass(frozen=True)
class WhatIfOptions:
    read_only: ReadOnly = "recorded"
    unmatched: Unmatched = "approve"
    # Shadows played at once, and how long one may take before it is stopped and reported.
    concurrency: int = 4
    shadow_timeout_seconds: float = 600.0

    def __post_init__(self) -> None:
        if self.read_only not in ("recorded", "live"):
            raise RunError(f"read_only is recorded or live, not {self.read_only!r}")
        if self.unmatched not in ("approve", "reject", "stop"):
            raise RunError(f"unmatched is approve, reject or stop, not {self.unmatched!r}")
        if not 1 <= self.concurrency <= 100 or self.shadow_timeout_seconds <= 0:
            raise RunError("concurrency is 1 to 100; the shadow timeout is positive")


def new_report_id() -> str:
    return f"wi-{uuid.uuid4().hex[:10]}"


async def what_if(
    client: Client,
    settings: Settings,
    recorded: Sequence[RecordedRun],
    variant: Variant,
    shadow_workers: ShadowWorkers,
    *,
    graders: Sequence[Grader] = (),
    options: WhatIfOptions = WhatIfOptions(),
    say: Callable[[str], None] = lambda line: None,
    report_id: str | None = None,
    known: AgentRegistry | None = None,
) -> WhatIfReport:
    """Play every recorded run again as a shadow of `variant`, compare, grade. A run's
    own agent is looked up in `known` (default: this process's AGENT_MODULES)."""
    if not recorded:
        raise RunError("no recorded runs to play again")
    report_id = report_id or new_report_id()
    known = known or local_agents()
    agents = {
        run.agent: variant.agent_for(known.agents.get(run.agent or BEFORE_AGENTS))
        for run in recorded
    }
    for run in recorded:
        own = known.agents.get(run.agent or BEFORE_AGENTS)
        if own is not None:  # a variant may only tighten what the agent's policy asks
            check_policy(own, variant.policy, decided_by_record=True)
    registry = AgentRegistry()
    for agent in {id(a): a for a in agents.values()}.values():
        registry.add(agent)
    recordings = Recordings(
        calls={run.store_key: run.calls for root in recorded for run in root.tree()},
        read_only=options.read_only,
        effect_tools=effect_tools(known),
    )
    queue = f"{WHATIF_QUEUE_PREFIX}{report_id}"
    limit = asyncio.Semaphore(options.concurrency)
    done = [0]

    async def play(index: int, run: RecordedRun) -> RunComparison:
        async with limit:
            shadow_id = f"whatif-{report_id}-{index}"
            agent = agents[run.agent]
            try:
                comparison = await _play(
                    client, run, agent, variant, shadow_id, queue, recordings, options
                )
                comparison.grades = await grade(comparison, graders)
            except (RunError, RPCError, WorkflowFailureError, ValueError) as err:
                comparison = _unplayed(run, shadow_id, one_line(err))
            done[0] += 1
            mark = "differs" if comparison.differences else "same"
            say(f"[{done[0]}/{len(recorded)}] {run.run_id}: {mark}")
            return comparison

    try:
        async with shadow_workers(client, settings, registry, recordings, queue):
            comparisons = await asyncio.gather(*(play(i, run) for i, run in enumerate(recorded, 1)))
    finally:
        await _stop_left_running(client, queue)
    return WhatIfReport(
        id=report_id,
        created_at=datetime.now(UTC),
        variant=variant.describe(),
        read_only=options.read_only,
        unmatched=options.unmatched,
        runs=list(comparisons),
        totals=totals(comparisons),
    )


def effect_tools(production: AgentRegistry) -> frozenset[str]:
    """The tools production declares with effects: never run for real by a what-if, even
    where a variant declares one read-only and no recorded run called it."""
    return frozenset(name for name, tool in production.tools.items() if tool.risk.has_effects)


def shadow_request(
    run: RecordedRun, agent: Agent, variant: Variant, unmatched: Unmatched
) -> RunRequest:
    """The recorded run's start, for the variant: its goal and every start option it
    carried (label, subject, limits, budget...); the variant's policy, else the run's, else
    its agent's, with nobody's signature needed (no person takes part in a shadow: its
    decisions come from the record)."""
    policy = variant.policy or run.request.policy or agent.policy or RunPolicy()
    policy = policy.model_copy(update={"require_signed_decisions": False, "trusted_keys": {}})
    options = StartOptions.fields_of(run.request) | {"policy": policy}
    return RunRequest(
        goal=run.request.goal,
        agent=agent.name,
        conversation=run.request.conversation,
        shadow=run.shadow_spec(unmatched),
        **options,
    )


async def _play(
    client: Client,
    run: RecordedRun,
    agent: Agent,
    variant: Variant,
    shadow_id: str,
    queue: str,
    recordings: Recordings,
    options: WhatIfOptions,
) -> RunComparison:
    request = shadow_request(run, agent, variant, options.unmatched)
    recordings.starting(shadow_id)  # its worker serves this very run, nothing else
    try:
        handle = await client.start_workflow(
            AgentWorkflow.run,
            request,
            id=shadow_id,
            task_queue=queue,
            static_summary=f"what-if of {run.run_id}",
        )
    except BaseException:
        recordings.started(shadow_id, None)
        raise
    recordings.started(shadow_id, handle.result_run_id)
    error: str | None = None
    try:
        await asyncio.wait_for(_story(client, handle, run), options.shadow_timeout_seconds)
    except TimeoutError:
        error = f"stopped: the shadow took longer than {options.shadow_timeout_seconds:g} s"
        await _stop(handle)
    except (WorkflowFailureError, RunError) as err:
        error = preview(
            str(err.cause if isinstance(err, WorkflowFailureError) and err.cause else err), 300
        )
    state = await runs.get_state(client, shadow_id)
    tree = {shadow_id: state.store_key} | await _shadow_children(client, state)
    now_calls: list[tuple[str, RecordedCall]] = [
        (workflow_id, call)
        for workflow_id, store_key in tree.items()
        for call in recordings.made.get(store_key, [])
    ]
    then = side(run.state, run.tree_calls(), run.result.error if run.result else None)
    now = side(state, now_calls, error)
    changes = effect_changes(then.effects, now.effects)
    return RunComparison(
        run_id=run.run_id,
        shadow_id=shadow_id,
        agent=run.agent,
        then=then,
        now=now,
        effect_changes=changes,
        differences=differences(then, now, changes),
    )


async def _shadow_children(client: Client, state: RunState, depth: int = 0) -> dict[str, str]:
    """The shadow's sub-agents' runs, by the delegations it recorded (ids to store keys):
    a run merely named like one of them is not counted."""
    found: dict[str, str] = {}
    if depth >= MAX_DEPTH:
        return found
    for delegation in state.delegations:
        try:
            child = await runs.get_state(client, delegation.child_id)
        except RunError:
            continue
        found[delegation.child_id] = child.store_key
        found |= await _shadow_children(client, child, depth + 1)
    return found


def _unplayed(run: RecordedRun, shadow_id: str, why: str) -> RunComparison:
    """A run whose shadow could not be played: reported, and failing, not dropped."""
    then = side(run.state, run.tree_calls(), None)
    now = Side(run_id=shadow_id, status="not played", error=preview(why, 300))
    return RunComparison(
        run_id=run.run_id,
        shadow_id=shadow_id,
        agent=run.agent,
        then=then,
        now=now,
        differences=[f"not played: {preview(why, 200)}"],
        grades=[Grade(grader="what-if", passed=False, reason=f"not played: {preview(why, 200)}")],
    )


async def _stop_left_running(client: Client, queue: str) -> None:
    """Shadows (and their children) still running once the what-if ends, by a timeout or
    an error or ^C: terminated, so none waits on a queue nobody polls any more."""
    query = f"TaskQueue = '{queue}' AND ExecutionStatus = 'Running'"
    with suppress(RPCError):
        async for execution in client.list_workflows(query):
            with suppress(RPCError):
                await client.get_workflow_handle(execution.id).terminate("what-if ended")


async def _story(client: Client, handle: Any, run: RecordedRun) -> None:
    """The shadow to its end: a conversation's messages sent again, each waiting for its
    turn's reply, then closed by whoever closed the recorded one (one still open then is
    closed by the what-if: a shadow ends)."""
    if run.request.conversation:
        for message in run.messages:
            again = message.model_copy(update={"signed": None, "wait": True})
            await conversations.send(client, handle.id, again)
        recorded = run.state.conversation
        closer = (recorded.closed_by if recorded is not None else None) or SHADOW_ACTOR
        await conversations.close(client, handle.id, Actor(by=closer))
    await handle.result()


async def _stop(handle: Any) -> None:
    with suppress(RPCError):
        await handle.terminate("what-if: the shadow took too long")


@contextmanager
def _reports(settings: Settings) -> Iterator[WhatIfReports]:
    """The reports' store, a database down or refusing us one line while it is used."""
    check_reachable(settings)
    with store_errors(settings):
        yield WhatIfReports(open_database(settings), keyring_from(settings))


def keep_report(settings: Settings, report: WhatIfReport) -> None:
    """Keep the report where the console finds it (`/whatif/ID`)."""
    with _reports(settings) as reports:
        reports.save(report.id, report.variant, report.model_dump(mode="json"))


def kept_report(settings: Settings, report_id: str) -> WhatIfReport | None:
    with _reports(settings) as reports:
        found = reports.load(report_id)
    return WhatIfReport.model_validate(found) if found is not None else None


def kept_reports(settings: Settings, limit: int = 50) -> list[dict[str, Any]]:
    with _reports(settings) as reports:
        return reports.recent(limit)
