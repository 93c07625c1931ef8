"""durable-agents: your own agents, run as Temporal workflows.

Declare tools with `@tool` and an `Agent` in one file, name the module in
`AGENT_MODULES`, and the worker runs it durably: every model call and tool call is an
activity, side effects happen once per idempotency key, people approve what the
policy says, and the history replays step for step (docs/your-own-agent.md).

`durable_agents.client` starts and steers runs from Python; `durable_agents.testing`
runs an agent against a scripted model on Temporal's time-skipping test server.
"""

from workflows.agents import Agent, MCPServer, Model, delegate
from workflows.contracts import RunBudget, RunLimits, RunPolicy
from workflows.memory import Memory
from workflows.rules import CallToReview, Evaluator, Verdict, evaluator
from workflows.tools import Tool, ToolContext, ToolRisk, tool

__all__ = [
    "Agent",
    "CallToReview",
    "Evaluator",
    "MCPServer",
    "Memory",
    "Model",
    "RunBudget",
    "RunLimits",
    "RunPolicy",
    "Tool",
    "ToolContext",
    "ToolRisk",
    "Verdict",
    "delegate",
    "evaluator",
    "tool",
]
