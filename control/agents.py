"""The agents this process knows (AGENT_MODULES): what `agentctl agents` lists and what
`agentctl run --agent` is checked against before anything starts."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from durable_agents.control.runs import RunError
from durable_agents.runtime.settings import load_settings
from durable_agents.workflows.agents import Agent
from durable_agents.workflows.contracts import RunLimits, RunPolicy, RunRequest
from durable_agents.workflows.memory import MemoryDeclarationError
from durable_agents.workflows.policy import loosening, policy_floor
from durable_agents.workflows.registry import AgentRegistry, load_registry
from durable_agents.workflows.rules import rule_name
from durable_agents.workflows.start_options import StartOptions, StartOptionsError
from durable_agents.workflows.tools import ToolDefinitionError


@functools.cache
def _load(modules: tuple[str, ...], folder: Path | None) -> AgentRegistry:
    return load_registry(modules, folder)


def local_agents(modules: list[str] | None = None) -> AgentRegistry:
    """The registry of these modules (default: AGENT_MODULES, from AGENT_MODULES_PATH or
    the current folder), or RunError in one line."""
    settings = load_settings()
    try:
        named = modules if modules is not None else settings.agent_modules
        return _load(tuple(named), settings.modules_path)
    except ToolDefinitionError as err:
        raise RunError(str(err)) from None


def known_agent(name: str, registry: AgentRegistry | None = None) -> Agent:
    registry = registry or local_agents()
    agent = registry.agents.get(name)
    if agent is None:
        known = ", ".join(sorted(registry.agents)) or "none"
        raise RunError(f"no agent named {name!r} (known: {known}; AGENT_MODULES names the modules)")
    return agent


def check_limits(agent: Agent, limits: RunLimits | None) -> None:
    """Limits that would be silently ignored are refused instead."""
    if limits is not None and not agent.planning and limits.steps_end != "answer":
        raise RunError(
            f"agent {agent.name!r} is a plain tool loop: it has no steps to end with "
            "complete_step (steps_end applies to planning agents)"
        )


def check_policy(
    agent: Agent, policy: RunPolicy | None, *, decided_by_record: bool = False
) -> None:
    """A requested policy may only tighten the agent's own (workflows/policy.py): one that
    loosens it is refused here, before anything starts (the run refuses it too)."""
    if policy is None:
        return
    floor = policy_floor(agent.policy, agent.tool_approvers)
    error = loosening(policy, floor, decided_by_record=decided_by_record)
    if error is not None:
        raise RunError(f"agent {agent.name}: {error}")


def describe(registry: AgentRegistry) -> list[dict[str, Any]]:
    """Agents, their tools and risks, as `agentctl agents --json` prints them."""
    return [
        {
            "name": agent.name,
            "planning": agent.planning,
            "model": agent.model_spec.name if agent.model_spec else None,
            "tools": [
                {"name": t.name, "risk": t.risk.value, "description": t.description}
                for t in agent.tools
            ],
            "rules": [rule_name(rule) for rule in agent.rules],
            "delegates": [
                {"tool": t.name, "agent": t.delegate_to, "risk": t.risk.value}
                for t in agent.delegate_tools
            ],
            "mcp_servers": [
                {
                    "name": server.name,
                    "transport": "stdio" if server.command else "http",
                    "risks": {pattern: risk.value for pattern, risk in server.risks.items()},
                }
                for server in agent.mcp_servers
            ],
            "budget": agent.budget.model_dump(exclude_none=True) if agent.budget else None,
        }
        for agent in sorted(registry.agents.values(), key=lambda a: a.name)
    ]


def check_subject(agent: Agent, subject: dict[str, str] | None) -> None:
    """An agent with memory keeps it per subject: a run missing what its namespace names
    is refused before it starts (RunError, one line)."""
    if agent.memory is None:
        return
    try:
        agent.memory.resolve(subject or {})
    except MemoryDeclarationError as err:
        raise RunError(f"agent {agent.name}: {err}") from None


def checked_request(
    registry: AgentRegistry,
    agent: str | Agent,
    goal: str,
    options: StartOptions,
    *,
    conversation: bool = False,
) -> RunRequest:
    """The one way a client-side start becomes a request: the agent known here, limits it
    can use, the subject its memory needs, and every option valid; else RunError in one
    line, before anything is sent."""
    found = known_agent(agent.name if isinstance(agent, Agent) else agent, registry)
    if conversation and found.output_type is not None:
        raise RunError(
            f"agent {found.name!r} answers once, as a {found.output_type.__name__}: it holds "
            "no conversation (start a run of it instead)"
        )
    check_limits(found, options.limits)
    check_subject(found, options.subject)
    check_policy(found, options.policy)
    try:
        return options.request(found.name, goal, conversation=conversation)
    except StartOptionsError as err:
        raise RunError(str(err)) from None


def start_options(**fields: Any) -> StartOptions:
    """StartOptions from keyword arguments, or RunError in one line."""
    try:
        return StartOptions.of(**fields)
    except StartOptionsError as err:
        raise RunError(str(err)) from None
