"""A continue-as-new: the run takes the carried state, identity included, sealed with
the deployment's key and packed by the run it continues, once the previous run's own
record shows it continued into this very run with this very input; its policy held to
its agent's floor."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows.activity_io import RunOrigin
    from durable_agents.workflows.policy import loosening, policy_floor
    from durable_agents.workflows.state.origin import Origin

from durable_agents.workflows.beginnings import AGENT_WORKFLOW, RETENTION_ADVICE, own_identity
from durable_agents.workflows.beginnings.start import Begun, Start, refuse


async def admits(run: Start, begun: Begun) -> None:
    """Shown by the chain's previous run (where the record was asked), then held to its
    agent's floor and to its queue; it keeps the identity it carries."""
    if begun.record is not None:
        refused = continuation_refused(workflow.info(), begun.record, run.origin)
        if refused is not None:
            refuse(refused)
    hold_carried_to_floor(run)
    run.held_to_its_queue()
    run.ctx.settle_signatures()


def continuation_refused(info: workflow.Info, origin: RunOrigin, carried: Origin) -> str | None:
    """Why Temporal's record refuses the continuation (one line), or None: `carried` is
    the state the run was built from."""
    previous = origin.previous
    named = f"run {info.continued_run_id}"
    if previous is None or not previous.found:
        return f"refused: the run this one continues ({named}) cannot be shown: {RETENTION_ADVICE}"
    if previous.workflow_type != AGENT_WORKFLOW or not previous.on_this_queue:
        return (
            f"refused: continued from a {previous.workflow_type} on {previous.task_queue!r}, "
            "not from a run of this deployment"
        )
    if not origin.continued_into_this:
        return f"refused: {named} did not continue as new into this run with this input"
    if carried.run_id != info.workflow_id or carried.identity != own_identity(info):
        return "refused: the carried state belongs to another run"
    return None


def hold_carried_to_floor(run: Start) -> None:
    """A continuation's carried policy, held to its agent's floor as this worker has the
    agent (the same rule as a start's and a sub-agent's, adopting.py): a carried state
    that loosens it was not made by this deployment's runs."""
    declared = run.ctx.registry().agent(run.ctx.agent.name).adopted()
    floor = policy_floor(declared.policy, declared.tool_approvers)
    error = loosening(run.terms.policy, floor, decided_by_record=run.origin.shadow is not None)
    if error is not None:
        refuse(f"refused: the carried state: {error}")
