"""Agents as data, their approval rules, and the registry a worker runs them from.

An agent is a name, instructions, tools, a model, a default policy and limits, and
whether it plans. A run resolves its agent when it starts and records what it may call
(`AgentRecord`); a worker that lacks that agent or one of its tools fails the workflow
task, so Temporal retries it on a worker that has them (docs/architecture.md).
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Field

from workflows.contracts import CompactModel, RunLimits, RunPolicy
from workflows.tools import (
    INTERNAL_TOOLS,
    Tool,
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

    def __post_init__(self) -> None:
        where = f"agent {self.name!r}"
        if not re.fullmatch(AGENT_NAME_PATTERN, self.name):
            raise ToolDefinitionError(f"{where}: a name is letters, digits and . _ - (≤100)")
        if not self.instructions.strip():
            raise ToolDefinitionError(f"{where}: give it instructions")
        seen: set[str] = set()
        for item in self.tools:
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
    def model_spec(self) -> Model | None:
        return self.model if isinstance(self.model, Model) else None

    def record(self) -> AgentRecord:
        """What a run started now may call: kept in its state for its whole life."""
        return AgentRecord(
            name=self.name,
            planning=self.planning,
            instructions_digest=digest_of(self.instructions),
            tools=[ToolRecord.of(t) for t in self.tools],
            rules=[rule_name(rule) for rule in self.rules],
        )


class ToolRecord(CompactModel):
    name: str
    risk: ToolRisk
    amount_field: str | None = None
    schema_digest: str

    @classmethod
    def of(cls, spec: Tool) -> ToolRecord:
        return cls(
            name=spec.name,
            risk=spec.risk,
            amount_field=spec.amount_field,
            schema_digest=spec.schema_digest,
        )


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
    # Who may decide on each tool's calls when the run's policy names nobody for it.
    tool_approvers: dict[str, list[str]] = Field(default_factory=dict)

    @classmethod
    def of(cls, agent: Agent) -> AdoptedAgent:
        return cls(
            record=agent.record(),
            policy=agent.policy,
            limits=agent.limits,
            tool_approvers={t.name: list(t.approvers) for t in agent.tools if t.approvers},
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
        if known is not None and known is not agent:
            raise ToolDefinitionError(f"two agents are named {agent.name!r}")
        self.agents[agent.name] = agent
        for spec in agent.tools:
            self._add_tool(spec)
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


def load_registry(modules: Sequence[str]) -> AgentRegistry:
    return AgentRegistry().load(modules)


def verdict_of(value: object, rule: str) -> Verdict:
    if isinstance(value, Verdict) and value.decision in ("approve", "deny", "ask"):
        return value
    raise TypeError(f"approval rule {rule!r} returned {value!r}, not a Verdict")
