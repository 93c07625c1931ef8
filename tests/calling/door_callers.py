"""A team's agent that pays, and workflows of theirs that call it through every door
tests/calling/test_run_agent_doors.py walks: a caller cancelled or terminated while its
agent waits, a child id reused, and an answer type that is not the agent's, unhandled.
`PAID` is the payment provider's own journal: each call of the tool that really ran."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents import Agent, RunPolicy, ToolRisk, run_agent, tool

PAID: list[tuple[str, float]] = []


class Payout(BaseModel):
    paid: bool


class Verdict(BaseModel):
    guilty: bool


@tool(risk=ToolRisk.SIDE_EFFECT, amount_field="amount")
def pay_out(customer: str, amount: float) -> str:
    """Pay a customer out."""
    PAID.append((customer, amount))
    return f"paid {amount} to {customer}"


payer = Agent(
    name="payer",
    instructions="Pay out what is owed.",
    planning=False,
    output_type=Payout,
    tools=[pay_out],
    policy=RunPolicy(approve_payments_above=10),
)


class Claim(BaseModel):
    text: str
    child_id: str


@workflow.defn
class PaysThroughAgent:
    """Calls the payer under a child id the test knows."""

    @workflow.run
    async def run(self, claim: Claim) -> str:
        payout = await run_agent(payer, claim.text, run_id=claim.child_id)
        return "paid" if payout.paid else "not paid"


@workflow.defn
class AsksThePayerForAVerdict:
    """An answer type that is not the agent's, and nothing catching the refusal."""

    @workflow.run
    async def run(self, goal: str) -> str:
        verdict = await run_agent(payer, goal, output_type=Verdict)  # type: ignore[misc]
        return str(verdict)
