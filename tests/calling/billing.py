"""A team's own code, as a Temporal project holds it: an agent with a typed answer and
two workflows of theirs that call it (the typed-answer tests and the calling workflow's
replay fixture use them)."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents import Agent, RunPolicy, ToolRisk, run_agent, tool


class TriageDecision(BaseModel):
    refund: bool
    priority: str


@tool(risk=ToolRisk.SIDE_EFFECT, amount_field="amount")
def issue_refund(customer: str, amount: float) -> str:
    """Refund a customer."""
    return f"refunded {amount} to {customer}"


triage = Agent(
    name="triage",
    instructions="Decide.",
    planning=False,
    output_type=TriageDecision,
    tools=[issue_refund],
    policy=RunPolicy(approve_payments_above=10),
)
GOOD = '{"refund": true, "priority": "high"}'


class Dispute(BaseModel):
    text: str
    child_id: str | None = None  # None: run_agent names the child itself


@workflow.defn
class Billing:
    """A team's own workflow: it branches on the agent's typed answer."""

    @workflow.run
    async def run(self, dispute: Dispute) -> str:
        decision = await run_agent(
            triage, dispute.text, output_type=TriageDecision, run_id=dispute.child_id
        )
        return f"{'refund' if decision.refund else 'close'} ({decision.priority})"


@workflow.defn
class BillingUntyped:
    """Without output_type: the run's whole result, its id among it."""

    @workflow.run
    async def run(self, dispute: str) -> list[str]:
        result = await run_agent("triage", dispute)
        return [result.run_id, result.status, str(result.output)]


@workflow.defn
class CallsNobody:
    """A typo in the agent's name: refused at once, not a child waiting forever."""

    @workflow.run
    async def run(self, name: str) -> str:
        result = await run_agent(name, "anything")
        return result.status


@workflow.defn
class AsksForADict:
    """An output_type that is no pydantic model: refused at once, not a task failing."""

    @workflow.run
    async def run(self, goal: str) -> str:
        answer = await run_agent(triage, goal, output_type=dict)  # type: ignore[misc]
        return str(answer)
