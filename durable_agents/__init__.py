"""durable-agents: your own agents, run as Temporal workflows.

Declare tools with `@tool` and an `Agent` in one file, name the module in
`AGENT_MODULES`, and the worker runs it durably: every model call and tool call is an
activity, side effects happen once per idempotency key, people approve what the
policy says, and the history replays step for step (docs/your-own-agent.md).

`durable_agents.client` starts and steers runs from Python; `durable_agents.testing`
runs an agent against a scripted model on Temporal's time-skipping test server;
`DurableAgentsPlugin` adds agents to a worker you already run, and `run_agent` calls
one from your own workflow (its `RunResult` and errors, `AgentRequestInvalid` and
`AgentGaveNoAnswer`, are importable here from workflow code too).

The names below load on first use (PEP 562): importing this package imports nothing
else, so Temporal's sandbox, which re-imports the workflow modules for each run, never
meets a second copy of a model class through this file, and the client does not pull
in the worker.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durable_agents.runtime.settings import (
        Settings as Settings,
    )
    from durable_agents.worker.plugin import (
        DurableAgentsPlugin as DurableAgentsPlugin,
    )
    from durable_agents.worker.plugin import (
        PluginError as PluginError,
    )
    from durable_agents.workflows.agents import (
        Agent as Agent,
    )
    from durable_agents.workflows.agents import (
        MCPServer as MCPServer,
    )
    from durable_agents.workflows.agents import (
        Model as Model,
    )
    from durable_agents.workflows.agents import (
        delegate as delegate,
    )
    from durable_agents.workflows.calling import (
        AgentGaveNoAnswer as AgentGaveNoAnswer,
    )
    from durable_agents.workflows.calling import (
        AgentRequestInvalid as AgentRequestInvalid,
    )
    from durable_agents.workflows.calling import (
        run_agent as run_agent,
    )
    from durable_agents.workflows.contracts import (
        RunBudget as RunBudget,
    )
    from durable_agents.workflows.contracts import (
        RunLimits as RunLimits,
    )
    from durable_agents.workflows.contracts import (
        RunPolicy as RunPolicy,
    )
    from durable_agents.workflows.contracts import (
        RunResult as RunResult,
    )
    from durable_agents.workflows.memory import (
        Memory as Memory,
    )
    from durable_agents.workflows.registry import (
        AgentRegistry as AgentRegistry,
    )
    from durable_agents.workflows.rules import (
        CallToReview as CallToReview,
    )
    from durable_agents.workflows.rules import (
        Evaluator as Evaluator,
    )
    from durable_agents.workflows.rules import (
        Verdict as Verdict,
    )
    from durable_agents.workflows.rules import (
        evaluator as evaluator,
    )
    from durable_agents.workflows.start_options import (
        StartOptions as StartOptions,
    )
    from durable_agents.workflows.tools import (
        Tool as Tool,
    )
    from durable_agents.workflows.tools import (
        ToolContext as ToolContext,
    )
    from durable_agents.workflows.tools import (
        ToolRisk as ToolRisk,
    )
    from durable_agents.workflows.tools import (
        tool as tool,
    )

# Each public name and the module that defines it.
_HOMES = {
    "Agent": "durable_agents.workflows.agents",
    "AgentGaveNoAnswer": "durable_agents.workflows.calling",
    "AgentRequestInvalid": "durable_agents.workflows.calling",
    "AgentRegistry": "durable_agents.workflows.registry",
    "CallToReview": "durable_agents.workflows.rules",
    "DurableAgentsPlugin": "durable_agents.worker.plugin",
    "Evaluator": "durable_agents.workflows.rules",
    "MCPServer": "durable_agents.workflows.agents",
    "Memory": "durable_agents.workflows.memory",
    "Model": "durable_agents.workflows.agents",
    "PluginError": "durable_agents.worker.plugin",
    "RunBudget": "durable_agents.workflows.contracts",
    "RunLimits": "durable_agents.workflows.contracts",
    "RunPolicy": "durable_agents.workflows.contracts",
    "RunResult": "durable_agents.workflows.contracts",
    "Settings": "durable_agents.runtime.settings",
    "StartOptions": "durable_agents.workflows.start_options",
    "Tool": "durable_agents.workflows.tools",
    "ToolContext": "durable_agents.workflows.tools",
    "ToolRisk": "durable_agents.workflows.tools",
    "Verdict": "durable_agents.workflows.rules",
    "delegate": "durable_agents.workflows.agents",
    "evaluator": "durable_agents.workflows.rules",
    "run_agent": "durable_agents.workflows.calling",
    "tool": "durable_agents.workflows.tools",
}

__all__ = [
    "Agent",
    "AgentGaveNoAnswer",
    "AgentRegistry",
    "AgentRequestInvalid",
    "CallToReview",
    "DurableAgentsPlugin",
    "Evaluator",
    "MCPServer",
    "Memory",
    "Model",
    "PluginError",
    "RunBudget",
    "RunLimits",
    "RunPolicy",
    "RunResult",
    "Settings",
    "StartOptions",
    "Tool",
    "ToolContext",
    "ToolRisk",
    "Verdict",
    "delegate",
    "evaluator",
    "run_agent",
    "tool",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'durable_agents' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
