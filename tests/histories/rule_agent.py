"""The agent of the evaluator-rule fixture: the offline model's `loop` scenario calls
`record_progress` once per item; a pure rule denies item 4, an evaluator (an activity)
asks a person about item 2 and approves the rest. Served when the fixtures are recorded
and replayed (tests/histories/record.py, tests/workflows/test_replay_fixtures.py)."""

from __future__ import annotations

from durable_agents import Agent, CallToReview, Verdict, evaluator
from durable_agents.examples.before_agents import record_progress
from durable_agents.runtime.settings import DEFAULT_AGENT_MODULES

# What the fixtures are recorded and replayed with: the bundled agents and this one.
FIXTURE_AGENT_MODULES = [*DEFAULT_AGENT_MODULES.split(","), __name__]


def no_fourth_item(review: CallToReview) -> Verdict | None:
    if review.arguments.get("step") == 4:
        return Verdict.deny("the fourth item is never recorded")
    return None


@evaluator
async def second_look(review: CallToReview) -> Verdict:
    """Stands for a review service: item 2 needs a person."""
    if review.arguments.get("step") == 2:
        return Verdict.ask("item 2 needs a second look")
    return Verdict.approve("routine item")


auditor = Agent(
    name="auditor",
    instructions="Record the work items one by one.",
    tools=[record_progress],
    planning=False,
    rules=[no_fourth_item, second_look],
)
