"""The `parent_state_at` activity: a fork's starting state, rebuilt from its parent's own
history at the fork's moment by replaying it through the workflow code here.

A fork request carries the state its caller read, and a caller could write anything
there (a payment tool marked read-only, an approval nobody gave). The fork takes only
the moment from it: the state at that moment is the parent's, as Temporal recorded it.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.client import Client, WorkflowHistory
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

from durable_agents.runtime.chains import chain_starts
from durable_agents.workflows import timeline
from durable_agents.workflows.activity_io import ParentMoment
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.registry import AgentRegistry, serve_for_replay
from durable_agents.workflows.state import RunState


class ForkStates:
    def __init__(self, registry: AgentRegistry) -> None:
        self.registry = registry

    @activity.defn(name="parent_state_at")
    async def parent_state_at(self, asked: ParentMoment) -> RunState:
        client = activity.client()
        chain = await _chain(client, asked.parent_run_id)
        serve_for_replay(
            self.registry, trusts_the_clear=client.data_converter.payload_codec is None
        )
        replaying = Replayer(
            workflows=[AgentWorkflow],
            data_converter=client.data_converter,
            workflow_runner=UnsandboxedWorkflowRunner(),
        )
        runs = [run for run, _ in chain]
        with timeline.recording(asked.parent_run_id, runs, states={asked.moment}) as kept:
            for run, history in chain:
                activity.heartbeat(run)
                replayed = await replaying.replay_workflow(history, raise_on_replay_failure=False)
                if replayed.replay_failure is not None:
                    raise ApplicationError(
                        f"the fork's parent {asked.parent_run_id} does not replay here: "
                        f"{replayed.replay_failure}",
                        non_retryable=True,
                    )
        if asked.moment not in kept:
            raise ApplicationError(
                f"the fork's parent {asked.parent_run_id} has no moment {asked.moment}",
                non_retryable=True,
            )
        return kept[asked.moment].state


async def _chain(client: Client, run_id: str) -> list[tuple[str, WorkflowHistory]]:
    """Every run of the parent's continue-as-new chain, oldest first, with its history;
    each must be an agent run of this deployment's task queue."""
    try:
        starts = await chain_starts(client, run_id)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise ApplicationError(
                f"the fork's parent {run_id} does not exist", non_retryable=True
            ) from err
        raise
    chain: list[tuple[str, WorkflowHistory]] = []
    for run, first in starts:
        started = first.workflow_execution_started_event_attributes
        where = (started.workflow_type.name, started.task_queue.name)
        if where != ("AgentWorkflow", activity.info().task_queue):
            raise ApplicationError(
                f"the fork's parent {run_id} has a run that is a {where[0]} on {where[1]!r}, "
                "not a run of this deployment",
                non_retryable=True,
            )
        chain.append((run, await client.get_workflow_handle(run_id, run_id=run).fetch_history()))
    return chain
