"""A team's agents beside billing's triage: `notes`, of free text (no output_type), which
a call asking for a model is refused for before its run starts; `assess`, whose answer
model lives in a module of its own (tests/calling/answer_model.py)."""

from __future__ import annotations

from durable_agents import Agent
from tests.calling.answer_model import Assessment

notes = Agent(name="notes", instructions="Take notes.", planning=False)
assess = Agent(name="assess", instructions="Assess.", planning=False, output_type=Assessment)
