"""A team's workflow module that imports the agent's answer model as plain workflow code,
not passed through: Temporal's sandbox imports tests.calling.answer_model again for each
run, so the Assessment here is another class object than the one the worker's `assess`
declares, of the same module and name, and the same model. run_agent takes it as the
agent's own type (a rule by identity alone refused it: "answers Assessment, not
Assessment")."""

from __future__ import annotations

from temporalio import workflow

from durable_agents import run_agent
from tests.calling.answer_model import Assessment  # the sandbox's own copy

with workflow.unsafe.imports_passed_through():  # the team's agent module, as the README's
    from tests.calling.more_agents import assess


@workflow.defn
class AsksWithItsOwnCopyOfTheType:
    """By name and by the Agent, with the sandbox's copy as output_type."""

    @workflow.run
    async def run(self, goal: str) -> list[str]:
        copied = Assessment is not assess.output_type  # the sandbox's own class
        by_name = await run_agent("assess", goal, output_type=Assessment)
        by_agent = await run_agent(assess, goal, output_type=Assessment)
        return [str(copied), type(by_name).__name__, str(by_name.score), str(by_agent.score)]
