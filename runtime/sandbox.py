"""What the agent workflow shares with its process outside Temporal's sandbox: one list,
for a worker (worker/sandbox.py) and for a replay that checks a release or travels in
time (control/timeline.py), so a replay runs the code as a worker does."""

from __future__ import annotations

from temporalio.worker.workflow_sandbox import SandboxRestrictions

# Our packages that hold no workflow code: a team's workflow module that imports them (the
# client, the testing kit) gets the worker's own copy, never a second one in the sandbox
# (whose re-import of native extensions such as cryptography's fails).
NOT_WORKFLOW_CODE = tuple(
    f"durable_agents.{name}"
    for name in (
        "client", "testing", "whatif", "models", "runtime", "activities", "control",
        "worker", "infra", "console", "starters",
    )
)  # fmt: skip
# The fault hooks: one module, seen inside the sandbox and out.
FAULT_HOOKS = "durable_agents.workflows.faults"
# The agent workflow's module, shared when the worker's sandbox is (runtime/settings.py).
AGENT_WORKFLOW = "durable_agents.workflows.agent"
# Time travel's recordings: a replay here hears what the workflow offers in there.
TIMELINE = "durable_agents.workflows.timeline"


def shared_modules(*, agent_workflow: bool = False, timeline: bool = False) -> tuple[str, ...]:
    shared: tuple[str, ...] = (FAULT_HOOKS, *NOT_WORKFLOW_CODE)
    if agent_workflow:
        shared += (AGENT_WORKFLOW,)
    if timeline:
        shared += (TIMELINE,)
    return shared


def restrictions(*, agent_workflow: bool = False, timeline: bool = False) -> SandboxRestrictions:
    return SandboxRestrictions.default.with_passthrough_modules(
        *shared_modules(agent_workflow=agent_workflow, timeline=timeline)
    )
