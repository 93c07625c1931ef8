"""How a run starts, besides its agent and goal: one typed set of options that every way
of starting a run takes (`AgentClient.start`, `open_conversation`, `create_schedule`,
`AgentTestbed`, `run_agent` in a workflow, `agentctl run` and `agentctl schedule create`),
so an option exists wherever it makes sense and means the same everywhere."""

from __future__ import annotations

from typing import Any, TypedDict

from pydantic import Field, ValidationError

from durable_agents.workflows.contract_base import StrictModel, first_problem
from durable_agents.workflows.contracts import (
    RunBudget,
    RunLimits,
    RunPolicy,
    RunRequest,
    Subject,
)


def conversation_title(agent: str) -> str:
    """A conversation's goal when its opener gives no title."""
    return f"Conversation with {agent}"


class StartOptionsError(ValueError):
    """Start options that cannot be used; the message says why in one line."""


class StartOptions(StrictModel):
    """Each field None: the agent's own (its policy, limits and budget), no label, no
    subject."""

    # A free label the model client forwards with each call (the offline model plays the
    # scenario it names).
    label: str | None = Field(default=None, max_length=500)
    # May only tighten the agent's declared policy.
    policy: RunPolicy | None = None
    limits: RunLimits | None = None
    # What the run and its sub-agents may spend.
    budget: RunBudget | None = None
    # What the run is about ({"customer": "jane"}): an agent with memory keeps its
    # memories under a namespace made from it.
    subject: Subject | None = Field(default=None, max_length=10)

    @classmethod
    def of(cls, **fields: Any) -> StartOptions:
        """Options from keyword arguments, or StartOptionsError in one line."""
        try:
            return cls.model_validate(fields)
        except ValidationError as err:
            raise StartOptionsError(
                f"invalid start option {first_problem(err, 'options')}"
            ) from None

    @classmethod
    def fields_of(cls, source: object) -> dict[str, Any]:
        """The options `source` carries (these options, a request, a run's state), by name:
        what starts from it again, or is compared with it, takes every option by this."""
        return {name: getattr(source, name) for name in cls.model_fields}

    def request(self, agent: str | None, goal: str, *, conversation: bool = False) -> RunRequest:
        """The run request these options make for `agent` and `goal` (StartOptionsError when
        the two do not make one)."""
        try:
            return RunRequest(
                goal=goal, agent=agent, conversation=conversation, **self.fields_of(self)
            )
        except ValidationError as err:
            raise StartOptionsError(
                f"invalid run request: {first_problem(err, 'request')}"
            ) from None


class StartFields(TypedDict, total=False):
    """The same options as keyword arguments (`client.start(agent, goal, subject=...)`);
    a test holds its keys to StartOptions' fields."""

    label: str | None
    policy: RunPolicy | None
    limits: RunLimits | None
    budget: RunBudget | None
    subject: dict[str, str] | None
