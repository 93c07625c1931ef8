"""A caller's id where a run's is asked for: `agentctl show|approve|reject|answer order-17`.

A team's workflow that calls an agent with `run_agent` has an id of its own (`order-17`),
the one the team knows; the agent runs as its child under a derived id
(`order-17.triage-…`, or whatever `run_id=` it chose). Given an id that is not an agent
run, these functions find the agent runs it started through Temporal's visibility
(`ParentWorkflowId`), never by guessing ids, and act on the one meant, or say in one
line which full ids there are to choose from.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.control import runs
from durable_agents.control.runs import WORKFLOW_TYPE, RunError, RunListing
from durable_agents.workflows.state import RunState


@dataclass(frozen=True)
class Target:
    """What an id names: an agent run (`caller` None), or a workflow of the team's whose
    agent runs are `agent_runs` (oldest first)."""

    run_id: str
    caller: str | None = None
    agent_runs: tuple[RunListing, ...] = ()


async def target(client: Client, run_id: str) -> Target:
    """The agent run `run_id` names, or the agent runs of the workflow it names; RunError
    when it is neither."""
    try:
        described = await runs.handle(client, run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunError(f"no run with id {run_id}") from None
        raise RunError(f"cannot read run {run_id}: {err.message}") from None
    if described.workflow_type == WORKFLOW_TYPE:
        return Target(run_id=run_id)
    children = await agent_runs_of(client, run_id)
    if not children:
        raise RunError(
            f"{run_id} is a {described.workflow_type} workflow that started no agent run"
        )
    return Target(run_id=run_id, caller=run_id, agent_runs=tuple(children))


async def agent_runs_of(client: Client, workflow_id: str) -> list[RunListing]:
    """The agent runs a workflow started as its children (`run_agent`), oldest first."""
    query = f"WorkflowType = '{WORKFLOW_TYPE}' AND ParentWorkflowId = '{_quoted(workflow_id)}'"
    newest_first = await runs.listings(client, query, limit=100)
    return newest_first[::-1]


def _quoted(value: str) -> str:
    # Run ids are checked (RUN_ID_PATTERN: no quote), but a query is never built unescaped.
    return value.replace("\\", "\\\\").replace("'", "\\'")


async def states(client: Client, run_id: str) -> tuple[Target, list[RunState]]:
    """`agentctl show`: the run's state, or the state of every agent run of the caller."""
    found = await target(client, run_id)
    if found.caller is None:
        return found, [await runs.get_state(client, run_id)]
    return found, [await runs.get_state(client, run.run_id) for run in found.agent_runs]


# How a refusal names what a run waits for (RunState.waiting_for); another is named as is.
WAITED_FOR = {"approval": "an approval", "input": "an answer"}


async def waiting_run(client: Client, run_id: str, waiting_for: str) -> str:
    """The agent run to act on for a person: `run_id` itself when it is an agent run, else
    the one agent run of that caller that waits for `waiting_for` ('approval', 'input');
    RunError naming the full ids to choose from when none or several do."""
    found = await target(client, run_id)
    if found.caller is None:
        return run_id
    waiting = [
        run
        for run in found.agent_runs
        if run.temporal_status == "running" and run.waiting_for == waiting_for
    ]
    if len(waiting) == 1:
        return waiting[0].run_id
    what = WAITED_FOR.get(waiting_for, waiting_for)
    if not waiting:
        ids = ", ".join(f"{run.run_id} ({run.status})" for run in found.agent_runs)
        raise RunError(f"no agent run of {run_id} waits for {what}; its agent runs: {ids}")
    ids = ", ".join(run.run_id for run in waiting)
    raise RunError(f"{len(waiting)} agent runs of {run_id} wait for {what}; name one: {ids}")


async def act_for_person(
    client: Client, run_id: str, waiting_for: str, act: Callable[[str], Awaitable[str]]
) -> str:
    """A person's decision (`act`, given the run to act on) on the run `run_id` names, or on
    its caller's one agent run that waits for `waiting_for`: what it said, and on which run
    when it was found through its caller. Any kind of decision goes through here
    (`agentctl approve|reject|answer`): one that is new needs nothing of this module."""
    acted_on = await waiting_run(client, run_id, waiting_for)
    said = await act(acted_on)
    return said if acted_on == run_id else f"{said} (run {acted_on})"
