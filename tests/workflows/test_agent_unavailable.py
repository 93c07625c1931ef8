"""A worker whose tool takes other arguments than the run recorded is not the worker for
that run: AgentUnavailable (the workflow task fails and waits for one that has the tool
as it was), never a call with arguments the tool no longer means."""

from __future__ import annotations

import pytest

from workflows.agents import Agent, AgentRegistry, AgentUnavailable
from workflows.tools import ToolRisk, tool


@tool(risk=ToolRisk.SIDE_EFFECT)
def refund(order_id: str, amount: str) -> dict[str, str]:
    """Refund an order."""
    return {"refunded": order_id}


def agent_with(*tools) -> Agent:
    return Agent(name="desk", instructions="Refund.", tools=list(tools), planning=False)


def test_a_changed_argument_schema_is_not_the_recorded_tool():
    recorded = agent_with(refund).record()
    [record] = [t for t in recorded.tools if t.name == "refund"]

    @tool(risk=ToolRisk.SIDE_EFFECT, name="refund")
    def refund_v2(order_id: str, amount_cents: int) -> dict[str, str]:
        """Refund an order, in cents now."""
        return {"refunded": order_id}

    same = AgentRegistry().add(agent_with(refund))
    assert same.tool_for(record, "desk").name == "refund"
    changed = AgentRegistry().add(agent_with(refund_v2))
    with pytest.raises(AgentUnavailable, match="takes other arguments than when the run"):
        changed.tool_for(record, "desk")
    gone = AgentRegistry().add(agent_with())
    with pytest.raises(AgentUnavailable, match="has no tool 'refund'"):
        gone.tool_for(record, "desk")
