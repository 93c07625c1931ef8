"""Agents as data, their approval rules, and the registry a worker runs them from.

An agent is a name, instructions, tools, a model, a default policy and limits, and
whether it plans. A run resolves its agent when it starts and records what it may call
(`AgentRecord`); a worker that lacks that agent or one of its tools fails the workflow
task, so Temporal retries it on a worker that has them (docs/architecture.md).
"""

from __future__ import annotations

import fnmatch
import importlib
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Field

from workflows.contracts import CompactModel, RunBudget, RunLimits, RunPolicy
from workflows.tools import (
    INTERNAL_TOOLS,
    TOOL_NAME_PATTERN,
    Tool,
    ToolArgs,
    ToolDefinitionError,
    ToolRisk,
    digest_of,
)

AGENT_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
# The agent of runs started before agents existed (their request names none).
BEFORE_AGENTS = "before-agents"


@dataclass(frozen=True)
class Model:
    """The model an agent talks to: a name, and optionally its own OpenAI-compatible
    endpoint and the environment variable (of the worker) that holds its key."""

    name: str
    base_url: str | None = None
    api_key_env: str | None = None


# -- approval rules of the agent's own ------------------------------------------------
VerdictKind = Literal["approve", "deny", "ask"]


@dataclass(frozen=True)
class Verdict:
    """A rule's answer about one tool call, with the reason people and the model read."""

    decision: VerdictKind
    reason: str

    @classmethod
    def approve(cls, reason: str) -> Verdict:
        return cls("approve", reason)

    @classmethod
    def deny(cls, reason: str) -> Verdict:
        return cls("deny", reason)

    @classmethod
    def ask(cls, reason: str) -> Verdict:
        return cls("ask", reason)


class CallToReview(BaseModel):
    """What an approval rule sees: the call, and where the run stands."""

    model_config = ConfigDict(frozen=True)

    tool: str
    arguments: dict[str, Any]
    risk: ToolRisk
    goal: str
    step: int
    spent_usd: float
    effects_so_far: int


# A pure function evaluated in workflow code: no I/O, no clock, no randomness.
Rule = Callable[[CallToReview], Verdict | None]


@dataclass(frozen=True, eq=False)
class Evaluator:
    """A rule run as an activity (a policy service, a model as judge); its verdict is
    recorded in the history, so a replay never asks again."""

    name: str
    fn: Callable[[CallToReview], Verdict | Awaitable[Verdict]] = field(repr=False)
    timeout: timedelta = timedelta(seconds=30)


@overload
def evaluator(fn: Callable[[CallToReview], Any], /) -> Evaluator: ...


@overload
def evaluator(
    *, name: str | None = None, timeout: float = 30.0
) -> Callable[[Callable[[CallToReview], Any]], Evaluator]: ...


def evaluator(
    fn: Callable[[CallToReview], Any] | None = None,
    /,
    *,
    name: str | None = None,
    timeout: float = 30.0,
) -> Evaluator | Callable[[Callable[[CallToReview], Any]], Evaluator]:
    """Declare an approval rule that runs as an activity (sync or async)."""

    def declare(function: Callable[[CallToReview], Any]) -> Evaluator:
        return Evaluator(
            name=name or function.__name__, fn=function, timeout=timedelta(seconds=timeout)
        )

    return declare(fn) if fn is not None else declare


def rule_name(rule: Rule | Evaluator) -> str:
    return rule.name if isinstance(rule, Evaluator) else getattr(rule, "__name__", "rule")


# -- sub-agents and MCP servers -----------------------------------------------------------
class DelegateArgs(ToolArgs):
    """What the model sends a sub-agent: the task, in words."""

    task: str = Field(min_length=1, max_length=4000, description="The task, fully stated.")


def delegate(
    agent: Agent,
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
class Agent:
    """An agent: what it is told, what it may call, which model, and its defaults.

    With `planning`, the model first submits a plan and works through it step by step;
    without, it is a plain tool loop that ends with the first reply calling no tool.
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
    delegates: Sequence[Agent | Tool] = ()
    mcp_servers: Sequence[MCPServer] = ()
    # What a run of this agent may spend, its sub-agents included (None: no limit).
    budget: RunBudget | None = None

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
        seen: set[str] = set()
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

    @property
    def all_tools(self) -> tuple[Tool, ...]:
        """Its own tools and its delegates (MCP tools are listed when a run starts)."""
        return (*self.tools, *self.delegate_tools)

    @property
    def delegate_tools(self) -> tuple[Tool, ...]:
        return tuple(t for t in self.delegates if isinstance(t, Tool))

    def mcp_server(self, name: str) -> MCPServer | None:
        return next((s for s in self.mcp_servers if s.name == name), None)

    @property
    def model_spec(self) -> Model | None:
        return self.model if isinstance(self.model, Model) else None

    def record(self) -> AgentRecord:
        """What a run started now may call: kept in its state for its whole life."""
        return AgentRecord(
            name=self.name,
            planning=self.planning,
            instructions_digest=digest_of(self.instructions),
            tools=[ToolRecord.of(t) for t in self.all_tools],
            rules=[rule_name(rule) for rule in self.rules],
        )


class ToolRecord(CompactModel):
    name: str
    risk: ToolRisk
    amount_field: str | None = None
    schema_digest: str
    # A delegate: the agent it hands tasks to.
    delegate: str | None = None
    # An MCP tool: its server, and its name there (the model may see it prefixed).
    mcp: str | None = None
    mcp_name: str | None = None

    @classmethod
    def of(cls, spec: Tool) -> ToolRecord:
        return cls(
            name=spec.name,
            risk=spec.risk,
            amount_field=spec.amount_field,
            schema_digest=spec.schema_digest,
            delegate=spec.delegate_to,
        )


class MCPToolSpec(CompactModel):
    """One tool an MCP server listed when a run started, as the run recorded it."""

    name: str  # as the model sees it (prefixed)
    mcp_name: str  # as the server names it
    risk: ToolRisk
    schema_digest: str


class MCPListing(CompactModel):
    """The `list_mcp_tools` activity's answer, recorded in the history: what the server
    offered then, whatever it offers later."""

    server: str
    tools: list[MCPToolSpec] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)  # names we cannot offer, and why


class MCPListRequest(CompactModel):
    run_id: str  # the run's store key: the full schemas are kept under it
    agent: str
    server: str


class AgentRecord(CompactModel):
    """The agent a run resolved when it started: changing the agent's code later does not
    change what this run may call."""

    name: str
    planning: bool = True
    instructions_digest: str
    tools: list[ToolRecord]
    rules: list[str] = Field(default_factory=list)

    def tool(self, name: str) -> ToolRecord | None:
        return next((t for t in self.tools if t.name == name), None)


class AdoptedAgent(CompactModel):
    """What a run takes from its agent's code when it starts, recorded in its history
    (the `resolve_agent` local activity): a replay, on any version of the code, reads the
    same record back."""

    record: AgentRecord
    policy: RunPolicy | None = None
    limits: RunLimits | None = None
    budget: RunBudget | None = None
    # Who may decide on each tool's calls when the run's policy names nobody for it.
    tool_approvers: dict[str, list[str]] = Field(default_factory=dict)
    mcp_servers: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, agent: Agent) -> AdoptedAgent:
        return cls(
            record=agent.record(),
            policy=agent.policy,
            limits=agent.limits,
            budget=agent.budget,
            tool_approvers={t.name: list(t.approvers) for t in agent.all_tools if t.approvers},
            mcp_servers=[server.name for server in agent.mcp_servers],
        )


class AgentUnavailable(Exception):
    """This worker cannot serve the run's recorded agent. Raised in workflow code as a
    plain exception, it fails the workflow task (not the run): Temporal retries the task,
    on this worker after a deploy or on another one that has the agent."""


@dataclass
class AgentRegistry:
    """The agents and tools one worker (or one CLI) knows, by name."""

    agents: dict[str, Agent] = field(default_factory=dict)
    tools: dict[str, Tool] = field(default_factory=dict)
    evaluators: dict[tuple[str, str], Evaluator] = field(default_factory=dict)
    modules: list[str] = field(default_factory=list)

    def add(self, *items: Agent | Tool) -> AgentRegistry:
        for item in items:
            if isinstance(item, Agent):
                self._add_agent(item)
            else:
                self._add_tool(item)
        return self

    def _add_agent(self, agent: Agent) -> None:
        known = self.agents.get(agent.name)
        if known is agent:
            return  # added already (agents may delegate to each other)
        if known is not None:
            raise ToolDefinitionError(f"two agents are named {agent.name!r}")
        self.agents[agent.name] = agent
        for spec in agent.all_tools:
            self._add_tool(spec)
            if spec.delegate_agent is not None:
                self._add_agent(spec.delegate_agent)
        for rule in agent.rules:
            if isinstance(rule, Evaluator):
                self.evaluators[(agent.name, rule.name)] = rule

    def _add_tool(self, spec: Tool) -> None:
        known = self.tools.get(spec.name)
        if known is not None and known is not spec:
            raise ToolDefinitionError(
                f"two different tools are named {spec.name!r}; a worker serves one of each"
            )
        self.tools[spec.name] = spec

    def load(self, module_paths: Iterable[str]) -> AgentRegistry:
        """Import each module and take the agents and tools defined at its top level."""
        module_paths = list(module_paths)
        if not module_paths:
            raise ToolDefinitionError("AGENT_MODULES names no module")
        for path in module_paths:
            try:
                module = importlib.import_module(path)
            except ImportError as err:
                raise ToolDefinitionError(f"cannot import agent module {path!r}: {err}") from err
            found = [
                value
                for _, value in inspect.getmembers(module)
                if isinstance(value, Agent | Tool) and not getattr(value, "internal", False)
            ]
            if not any(isinstance(value, Agent) for value in found):
                raise ToolDefinitionError(f"agent module {path!r} defines no Agent")
            self.add(*found)
            self.modules.append(path)
        return self

    def agent(self, name: str) -> Agent:
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise AgentUnavailable(f"no agent named {name!r} here (agents: {known})")
        return agent

    def tool_for(self, record: ToolRecord, agent: str) -> Tool:
        """The worker's tool for a run's recorded tool, or AgentUnavailable."""
        if record.mcp is not None:
            return mcp_tool(record)
        spec = INTERNAL_TOOLS.get(record.name) or self.tools.get(record.name)
        if spec is None:
            raise AgentUnavailable(
                f"this worker has no tool {record.name!r}, which agent {agent!r} had when "
                "the run started; the run waits for a worker that has it (AGENT_MODULES)"
            )
        if spec.schema_digest != record.schema_digest:
            raise AgentUnavailable(
                f"this worker's tool {record.name!r} takes other arguments than when the run "
                f"started (schema {spec.schema_digest}, recorded {record.schema_digest}); the "
                "run waits for a worker with the tool as it was"
            )
        return spec

    def evaluator(self, agent: str, name: str) -> Evaluator | None:
        return self.evaluators.get((agent, name))


# The registry each worker serves, by task queue: the workflow finds its own worker's
# registry through its task queue (a worker serves one task queue).
_BY_TASK_QUEUE: dict[str, AgentRegistry] = {}
# What a replayer (time travel, the replay tests) serves: any task queue.
_FOR_REPLAY: list[AgentRegistry] = []


def serve(task_queue: str, registry: AgentRegistry) -> None:
    _BY_TASK_QUEUE[task_queue] = registry


def serve_for_replay(registry: AgentRegistry) -> None:
    _FOR_REPLAY[:] = [registry]


def served(task_queue: str) -> AgentRegistry:
    registry = _BY_TASK_QUEUE.get(task_queue) or next(iter(_FOR_REPLAY), None)
    if registry is None:
        raise AgentUnavailable(f"no worker in this process serves task queue {task_queue!r}")
    return registry


class MCPArguments(BaseModel):
    """An MCP tool's arguments: any JSON object; the server checks them against its schema."""

    model_config = ConfigDict(extra="allow", frozen=True)


def mcp_tool(record: ToolRecord) -> Tool:
    """An MCP tool as the workflow handles it, from the run's record (the worker's code
    has no function for it: the `call_mcp_tool` activity calls the server)."""
    return Tool(
        name=record.name,
        description=f"MCP tool {record.mcp_name} of {record.mcp}",
        risk=record.risk,
        args_model=MCPArguments,
    )


def load_registry(modules: Sequence[str]) -> AgentRegistry:
    return AgentRegistry().load(modules)


def verdict_of(value: object, rule: str) -> Verdict:
    if isinstance(value, Verdict) and value.decision in ("approve", "deny", "ask"):
        return value
    raise TypeError(f"approval rule {rule!r} returned {value!r}, not a Verdict")
