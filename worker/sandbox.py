"""What the agent workflow shares with the worker outside Temporal's sandbox."""

from __future__ import annotations

from temporalio.worker.workflow_sandbox import SandboxRestrictions

from durable_agents.runtime.settings import Settings
from durable_agents.workflows.agent import AgentWorkflow

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


def shared_modules(settings: Settings) -> tuple[str, ...]:
    """The fault hooks are shared with the sandbox (one module, seen inside and out); with
    a shared sandbox the agent workflow's module is too (runtime/settings.py says why)."""
    shared: tuple[str, ...] = ("durable_agents.workflows.faults", *NOT_WORKFLOW_CODE)
    if settings.workflow_sandbox == "shared":
        shared += (AgentWorkflow.__module__,)
    return shared


def sandbox_restrictions(settings: Settings) -> SandboxRestrictions:
    return SandboxRestrictions.default.with_passthrough_modules(*shared_modules(settings))
