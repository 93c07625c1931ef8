"""The agents and tools one worker (or one CLI) knows, by name, and the registry each
worker serves by task queue: the workflow finds its worker's agents there, and a worker
that lacks a run's agent, tool or rule raises AgentUnavailable (the workflow task fails,
not the run, and Temporal retries it until a worker that has them picks it up)."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from durable_agents.workflows.agent_records import (
    ToolRecord,
)
from durable_agents.workflows.agents import Agent
from durable_agents.workflows.rules import (
    Evaluator,
)
from durable_agents.workflows.tools import (
    INTERNAL_TOOLS,
    Tool,
    ToolDefinitionError,
)

# Top-level names our modules had before the one import package (an old AGENT_MODULES).
OUR_OLD_PACKAGES = ("examples", "workflows", "activities")


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
                hint = ""
                if path.split(".")[0] in OUR_OLD_PACKAGES:
                    hint = f" (our bundled modules are named durable_agents.{path} now)"
                raise ToolDefinitionError(
                    f"cannot import agent module {path!r}: {err}{hint}"
                ) from err
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


# Task queues whose worker holds no keys and was told in so many words that nobody else
# polls its namespace (or that runs on Temporal's test server): there, what a run is
# handed in the clear counts as the deployment's own (workflows/admission.py). Everywhere
# else only what carries the deployment's key does.
_TRUSTS_THE_CLEAR: set[str] = set()
_REPLAY_TRUSTS_THE_CLEAR = [True]


def serve(task_queue: str, registry: AgentRegistry, *, trusts_the_clear: bool = False) -> None:
    _BY_TASK_QUEUE[task_queue] = registry
    if trusts_the_clear:
        _TRUSTS_THE_CLEAR.add(task_queue)
    else:
        _TRUSTS_THE_CLEAR.discard(task_queue)


def serve_for_replay(registry: AgentRegistry, *, trusts_the_clear: bool = True) -> None:
    """A replayer: with keys it reads sealed histories as the worker did; without keys
    there is nothing sealed to tell apart."""
    _FOR_REPLAY[:] = [registry]
    _REPLAY_TRUSTS_THE_CLEAR[:] = [trusts_the_clear]


def trusts_the_clear(task_queue: str) -> bool:
    """Whether this process's worker for `task_queue` takes unsealed inputs as its own."""
    if task_queue in _BY_TASK_QUEUE:
        return task_queue in _TRUSTS_THE_CLEAR
    return bool(_FOR_REPLAY) and _REPLAY_TRUSTS_THE_CLEAR[0]


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


def load_registry(modules: Sequence[str], folder: Path | None = None) -> AgentRegistry:
    """The agents of these modules, imported as `python -m` would from `folder` (default:
    the current folder): a team's own module beside its workflows.py is found as is."""
    if any(not name.startswith("durable_agents.") for name in modules):
        importable_from(folder or Path.cwd())
    return AgentRegistry().load(modules)


def importable_from(folder: Path) -> None:
    """Put `folder` first on the import path, once."""
    where = str(folder.resolve())
    if where not in sys.path:
        sys.path.insert(0, where)
