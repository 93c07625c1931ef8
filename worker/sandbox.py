"""What the agent workflow shares with the worker outside Temporal's sandbox (the list is
runtime/sandbox.py's, which a replay uses too)."""

from __future__ import annotations

from temporalio.worker.workflow_sandbox import SandboxRestrictions

from durable_agents.runtime import sandbox
from durable_agents.runtime.sandbox import NOT_WORKFLOW_CODE as NOT_WORKFLOW_CODE
from durable_agents.runtime.settings import Settings


def shared_modules(settings: Settings) -> tuple[str, ...]:
    """The fault hooks are shared with the sandbox (one module, seen inside and out); with
    a shared sandbox the agent workflow's module is too (runtime/settings.py says why)."""
    return sandbox.shared_modules(agent_workflow=settings.workflow_sandbox == "shared")


def sandbox_restrictions(settings: Settings) -> SandboxRestrictions:
    return sandbox.restrictions(agent_workflow=settings.workflow_sandbox == "shared")
