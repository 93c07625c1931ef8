"""A team's code for tests/integration/test_kept_promises.py: an agent with a typed answer,
the same agent as a team's workflow module may still hold it (from before its answer
became a Verdict), and the team's workflow that calls it so. One scripted model answers
every run (a run's own script by its id in `SCRIPT.runs`, else a Verdict)."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents import Agent, Model, run_agent
    from durable_agents.testing import ScriptedModel, say


class Verdict(BaseModel):
    refund: bool
    priority: str


class Shipment(BaseModel):
    """Another model: the one a stale copy of the agent names."""

    carrier: str
    days: int


GOOD = '{"refund": true, "priority": "high"}'
SCRIPT = ScriptedModel([say(GOOD)])


def scripted() -> ScriptedModel:
    return SCRIPT


SCRIPTED = Model("scripted", client=scripted)
typed = Agent(
    name="typed", instructions="Decide.", planning=False, model=SCRIPTED, output_type=Verdict
)
# The agent as a team's module may still declare it: the worker's answers a Verdict.
stale_typed = Agent(
    name="typed", instructions="Decide.", planning=False, model=SCRIPTED, output_type=Shipment
)


@workflow.defn
class AsksAnotherModel:
    """Calls the agent through its stale copy: run_agent reads the answer as a Shipment."""

    @workflow.run
    async def run(self, child_id: str) -> str:
        shipment = await run_agent(stale_typed, "Customer 42 was charged twice", run_id=child_id)
        return str(shipment)
