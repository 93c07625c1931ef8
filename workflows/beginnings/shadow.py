"""A what-if shadow (workflows/whatif.py): admitted as a fresh start is, and shown by its
queue: a shadow runs only on a what-if task queue, whose worker answers its tools from
the recording; a what-if queue runs only shadows. Every beginning is held to it
(`Start.held_to_its_queue`): a shadow's sub-agents and continuations are shadows too."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows.whatif import ShadowSpec, whatif_queue


def misplaced(shadow: ShadowSpec | None, task_queue: str) -> str | None:
    """Why this run may not go on here: a shadow off a what-if queue would have its
    approvals decided by its start request; a plain run on one would answer nobody."""
    if shadow is not None and not whatif_queue(task_queue):
        return "refused: a what-if shadow runs only on a what-if task queue"
    if shadow is None and whatif_queue(task_queue):
        return "refused: a what-if task queue runs only what-if shadows"
    return None
