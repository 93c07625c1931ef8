"""The refund agent: refunds a customer. Refunds are side effects; the run's policy
(`approve_payments_above`) decides which amount needs a person."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from durable_agents import Agent, RunPolicy, ToolContext, ToolRisk, tool
from durable_agents.examples.invoice import EMAIL_ADDRESS, act


class RefundArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    customer_email: str = EMAIL_ADDRESS
    amount: Decimal = Field(gt=0, max_digits=12, decimal_places=2)
    currency: str = Field(default="EUR", pattern=r"^[A-Z]{3}$")
    reason: str = Field(min_length=1, max_length=500)


@tool(risk=ToolRisk.SIDE_EFFECT, amount_field="amount")
def issue_refund(ctx: ToolContext, args: RefundArgs) -> dict[str, Any]:
    """Refund a customer. Moves money; the run's policy sets when a human must approve."""
    return act(ctx, "payments", "refund", args)


# A plain tool loop (no plan), with a default policy: refunds above 50 need a person.
refund_agent = Agent(
    name="refund",
    instructions="You refund customers as the goal says, once each.",
    tools=[issue_refund],
    planning=False,
    policy=RunPolicy(approve_payments_above=Decimal("50")),
)
