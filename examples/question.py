"""The question agent: asks a person which invoice to handle (the built-in ask_human
tool), then looks it up."""

from __future__ import annotations

from durable_agents import Agent
from durable_agents.examples.invoice import lookup_invoice

question_agent = Agent(
    name="question",
    instructions="When the goal leaves a choice open, ask the human before acting.",
    tools=[lookup_invoice],
)
