"""Agents as data, their approval rules, and the registry a worker runs them from.

An agent is a name, instructions, tools, a model, a default policy and limits, and
whether it plans. A run resolves its agent when it starts and records what it may call
(`AgentRecord`); a worker that lacks that agent or one of its tools fails the workflow
task, so Temporal retries it on a worker that has them (docs/architecture.md).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic

from pydantic import BaseModel, Field
from typing_extensions import TypeVar

from durable_agents.workflows.agent_records import (
    AdoptedAgent,
    AgentRecord,
    ToolRecord,
)
from durable_agents.workflows.contracts import RunBudget, RunLimits, RunPolicy
from durable_agents.workflows.memory import MEMORY_TOOLS, Memory, memory_tools
from durable_agents.workflows.output import check_output_type, output_record
from durable_agents.workflows.rules import (
    Evaluator,
    Rule,
    rule_name,
)
from durable_agents.workflows.tools import (
    INTERNAL_TOOLS,
    TOOL_NAME_PATTERN,
    Tool,
    ToolArgs,
    ToolDefinitionError,
    ToolRisk,
    digest_of,
)

AGENT_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"

# An agent's answer type (`Agent(output_type=RefundDecision)` is an
# `Agent[RefundDecision]`), which `run_agent` returns. Invariant, so mypy refuses a call
# asking another type; Any for an agent that answers in free text, and for a bare `Agent`
# annotation, which so takes every agent.
OutputT = TypeVar("OutputT", bound=BaseModel, default=Any)


# The agent of runs started before agents existed (their request names none).
BEFORE_AGENTS = "before-agents"


@dataclass(frozen=True)
class Model:
    """The model an agent talks to: a name, and optionally its own OpenAI-compatible
    endpoint and the environment variable (of the worker) that holds its key; or a client
    of your own (`client`: makes a `durable_agents.models.ModelClient`, once per worker),
    for an endpoint that speaks another protocol."""

    name: str
    base_url: str | None = None
    api_key_env: str | None = None
    client: Callable[[], object] | None = None


# -- approval rules of the agent's own ------------------------------------------------


# -- sub-agents and MCP servers -----------------------------------------------------------
class DelegateArgs(ToolArgs):
    """What the model sends a sub-agent: the task, in words."""

    task: str = Field(min_length=1, max_length=4000, description="The task, fully stated.")


def delegate(
    agent: Agent[Any],
    *,
    name: str | None = None,
    description: str | None = None,
    risk: ToolRisk = ToolRisk.READ_ONLY,
) -> Tool:
    """A tool that hands a task to another agent, run as a child workflow of the run.

    The model calls it like any tool (`{"task": ...}`) and reads the sub-agent's final
    answer as the result. Its risk gates the delegation itself; the sub-agent's own tools
    keep their own risks and approvals."""
    if not isinstance(agent, Agent):
        raise ToolDefinitionError(f"delegate({agent!r}): give it an Agent")
    tool_name = name or "ask_" + re.sub(r"[^A-Za-z0-9_-]", "_", agent.name)[:60]
    if not re.fullmatch(TOOL_NAME_PATTERN, tool_name):
        raise ToolDefinitionError(f"delegate: {tool_name!r} is not a tool name (1-64 of A-z0-9_-)")
    first_line = agent.instructions.strip().splitlines()[0]
    text = description or f"Hand a task to the {agent.name} agent and get its answer. {first_line}"
    return Tool(
        name=tool_name,
        description=text,
        risk=ToolRisk(risk),
        args_model=DelegateArgs,
        delegate_to=agent.name,
        delegate_agent=agent,
    )


MCP_SERVER_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$"


@dataclass(frozen=True)
class MCPServer:
    """An MCP server whose tools an agent may call: a stdio `command`, or a streamable
    HTTP `url` (its headers come from the worker's settings, AGENT_MCP_HEADERS, never from
    code or history). Its tool list is read and recorded when a run starts.

    `risks` maps a tool's name, or a pattern (`fnmatch`: `get_*`), to its risk; the first
    exact name wins, then the first matching pattern. A tool not named is NEEDS_APPROVAL:
    an unknown tool is dangerous until someone says otherwise. `prefix` goes before each
    tool's name as the model sees it (two servers may list the same name). A stdio
    server gets `env`, and the worker's own variables named in `env_from_worker` (its
    secrets stay in the worker's environment, not in code)."""

    name: str
    command: Sequence[str] | None = None
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    env_from_worker: Sequence[str] = ()
    risks: Mapping[str, ToolRisk] = field(default_factory=dict)
    prefix: str = ""
    timeout: float = 60.0

    def __post_init__(self) -> None:
        where = f"MCP server {self.name!r}"
        if not re.fullmatch(MCP_SERVER_NAME, self.name):
            raise ToolDefinitionError(f"{where}: a name is letters, digits, _ and - (<=40)")
        if (self.command is None) == (self.url is None):
            raise ToolDefinitionError(f"{where}: give a command (stdio) or a url (HTTP), one")
        if self.command is not None and (isinstance(self.command, str) or not self.command):
            raise ToolDefinitionError(f"{where}: command is a list: [program, *arguments]")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ToolDefinitionError(f"{where}: url must start with http:// or https://")
        if self.prefix and not re.fullmatch(r"^[A-Za-z0-9_-]{1,20}$", self.prefix):
            raise ToolDefinitionError(f"{where}: a prefix is up to 20 of A-z0-9_-")
        if self.timeout <= 0:
            raise ToolDefinitionError(f"{where}: timeout must be positive")
        object.__setattr__(self, "command", tuple(self.command) if self.command else None)
        object.__setattr__(self, "env_from_worker", tuple(self.env_from_worker))
        object.__setattr__(self, "risks", {k: ToolRisk(v) for k, v in self.risks.items()})

    def risk_of(self, tool: str) -> ToolRisk:
        if tool in self.risks:
            return self.risks[tool]
        for pattern, risk in self.risks.items():
            if fnmatch.fnmatchcase(tool, pattern):
                return risk
        return ToolRisk.NEEDS_APPROVAL


# -- the agent ------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Agent(Generic[OutputT]):
    """An agent: what it is told, what it may call, which model, and its defaults.

    With `planning`, the model first submits a plan and works through it step by step;
    without, it is a plain tool loop that ends with the first reply calling no tool.
    Generic in its answer type: `Agent(output_type=RefundDecision)` is an
    `Agent[RefundDecision]`, and `run_agent` on it returns a RefundDecision.
    """

    name: str
    instructions: str
    tools: Sequence[Tool] = ()
    model: Model | str | None = None
    policy: RunPolicy | None = None
    limits: RunLimits | None = None
    planning: bool = True
    rules: Sequence[Rule | Evaluator] = ()
    # Sub-agents the model may hand tasks to (`delegate(agent)`, or the agent itself).
    delegates: Sequence[Agent[Any] | Tool] = ()
    mcp_servers: Sequence[MCPServer] = ()
    # What a run of this agent may spend, its sub-agents included (None: no limit).
    budget: RunBudget | None = None
    # Memory across runs (workflows/memory.py): the built-in remember, recall and forget
    # tools on a namespace made from the run's subject.
    memory: Memory | None = None
    # The answer's type: a pydantic model the final answer must validate against
    # (workflows/output.py); None: free text.
    output_type: type[OutputT] | None = None

    def __post_init__(self) -> None:
        where = f"agent {self.name!r}"
        if not re.fullmatch(AGENT_NAME_PATTERN, self.name):
            raise ToolDefinitionError(f"{where}: a name is letters, digits and . _ - (≤100)")
        if not self.instructions.strip():
            raise ToolDefinitionError(f"{where}: give it instructions")
        delegates = tuple(
            item if isinstance(item, Tool) else delegate(item) for item in self.delegates
        )
        for item in delegates:
            if item.delegate_to is None:
                raise ToolDefinitionError(f"{where}: {item.name!r} is no delegate; use delegate()")
        object.__setattr__(self, "delegates", delegates)
        servers = [server.name for server in self.mcp_servers]
        if len(set(servers)) != len(servers):
            raise ToolDefinitionError(f"{where}: two MCP servers share a name")
        object.__setattr__(self, "mcp_servers", tuple(self.mcp_servers))
        seen: set[str] = set(MEMORY_TOOLS) if self.memory is not None else set()
        for item in (*self.tools, *delegates):
            if not isinstance(item, Tool):
                raise ToolDefinitionError(f"{where}: {item!r} is not a tool; decorate it @tool")
            if item.name in INTERNAL_TOOLS:
                raise ToolDefinitionError(f"{where}: {item.name!r} is a built-in tool's name")
            if item.name in seen:
                raise ToolDefinitionError(f"{where}: two tools are named {item.name!r}")
            seen.add(item.name)
        if not self.planning and self.limits is not None and self.limits.steps_end != "answer":
            raise ToolDefinitionError(f"{where}: steps_end applies to planning agents only")
        names = [rule_name(rule) for rule in self.rules]
        if len(set(names)) != len(names):
            raise ToolDefinitionError(f"{where}: two approval rules share a name")
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "rules", tuple(self.rules))
        if isinstance(self.model, str):
            object.__setattr__(self, "model", Model(self.model))
        if self.output_type is not None:
            check_output_type(where, self.output_type)

    @property
    def all_tools(self) -> tuple[Tool, ...]:
        """Its own tools, its delegates and its memory's (MCP tools are listed when a run
        starts)."""
        memory = memory_tools() if self.memory is not None else ()
        return (*self.tools, *self.delegate_tools, *memory)

    @property
    def tool_approvers(self) -> dict[str, list[str]]:
        """Who may decide on each tool's calls, as its tools declare (unlisted: anyone)."""
        return {t.name: list(t.approvers) for t in self.all_tools if t.approvers}

    @property
    def delegate_tools(self) -> tuple[Tool, ...]:
        return tuple(t for t in self.delegates if isinstance(t, Tool))

    def mcp_server(self, name: str) -> MCPServer | None:
        return next((s for s in self.mcp_servers if s.name == name), None)

    @property
    def model_spec(self) -> Model | None:
        return self.model if isinstance(self.model, Model) else None

    def adopted(self) -> AdoptedAgent:
        """What a run started now takes from this agent (the `resolve_agent` activity)."""
        return AdoptedAgent(
            record=self.record(),
            policy=self.policy,
            limits=self.limits,
            budget=self.budget,
            tool_approvers=self.tool_approvers,
            mcp_servers=[server.name for server in self.mcp_servers],
        )

    def record(self) -> AgentRecord:
        """What a run started now may call: kept in its state for its whole life."""
        return AgentRecord(
            name=self.name,
            planning=self.planning,
            instructions_digest=digest_of(self.instructions),
            tools=[ToolRecord.of(t) for t in self.all_tools],
            rules=[rule_name(rule) for rule in self.rules],
            memory=self.memory.declared() if self.memory is not None else None,
            output=output_record(self.output_type) if self.output_type is not None else None,
        )
