"""A sub-agent (its request names the run that delegated to it) and a `run_agent` child:
shown by the parent Temporal records, which must be a run on this queue (and, for a
sub-agent, an agent run); then admitted as a fresh start, its agent's floors holding
what its parent hands it (adopting.py)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows.activity_io import OtherRun, RunOrigin
    from durable_agents.workflows.contracts import RunRequest

from durable_agents.workflows.beginnings import AGENT_WORKFLOW, RETENTION_ADVICE
from durable_agents.workflows.beginnings.fresh import admits as admits_as_fresh
from durable_agents.workflows.beginnings.start import Begun, Start, refuse


async def admits(run: Start, begun: Begun) -> None:
    if begun.record is not None:
        refused = parent_refused(begun.request, workflow.info(), begun.record)
        if refused is not None:
            refuse(refused)
    await admits_as_fresh(run, begun)


def parent_refused(request: RunRequest, info: workflow.Info, origin: RunOrigin) -> str | None:
    """Why Temporal's record of the parent refuses the child (one line), or None."""
    refused = _unshown(info, origin.parent)
    parent = origin.parent
    # Only an agent run delegates: a workflow of another type reusing a closed parent's
    # id would hand on that parent's sealed terms.
    typed = refused is None and request.delegated_by is not None and parent is not None
    if typed and parent is not None and parent.workflow_type != AGENT_WORKFLOW:
        return f"refused: delegated to by a {parent.workflow_type}, not by an agent run"
    return refused


def _unshown(info: workflow.Info, parent: OtherRun | None) -> str | None:
    assert info.parent is not None
    named = f"{info.parent.workflow_id} ({info.parent.run_id})"
    if parent is None or not parent.found:
        return (
            f"refused: the run that started this one, {named}, cannot be shown: {RETENTION_ADVICE}"
        )
    if not parent.on_this_queue:
        return (
            f"refused: started by a {parent.workflow_type} on {parent.task_queue!r}, not by a "
            "run of this deployment"
        )
    return None
