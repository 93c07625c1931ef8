"""Triage hands research to a research agent, which reads a knowledge base over MCP, all
under one budget: the support desk of docs/your-own-agent.md ("Sub-agents", "Budgets",
"MCP tools").

The research agent's MCP server is examples/kb_server.py, started over stdio by the
worker when a run begins. `search_notes` is declared read-only and `add_note` a side
effect; `purge_notes` is declared nowhere, so each call of it waits for a person.
"""

from __future__ import annotations

import sys

from durable_agents import Agent, MCPServer, RunBudget, ToolRisk, delegate

knowledge_base = MCPServer(
    "kb",
    command=[sys.executable, "-m", "durable_agents.examples.kb_server"],
    # The server keeps its notes under the worker's data dir (or KB_DIR).
    env_from_worker=["AGENT_DATA_DIR", "KB_DIR"],
    risks={"search_*": ToolRisk.READ_ONLY, "add_note": ToolRisk.SIDE_EFFECT},
)

research_agent = Agent(
    name="research",
    instructions="Research the task in the knowledge base and answer in a few sentences. "
    "Add a note when you learn something the knowledge base lacks.",
    mcp_servers=[knowledge_base],
    planning=False,
)

triage_agent = Agent(
    name="triage",
    instructions="Triage the customer's ticket: hand what needs looking up to the research "
    "agent, then answer the customer.",
    delegates=[delegate(research_agent)],
    planning=False,
    # The whole tree (triage and its research) spends at most this much.
    budget=RunBudget(usd=0.50, tool_calls=20),
)
