"""An agent that moves no money itself but hands refunds to one that does: its runs
hand their policy down to the refund agent, so its policy is the one that must be signed
(tests/control/test_signed_payments.py, test_doctor_protections.py)."""

from __future__ import annotations

from durable_agents import Agent, delegate
from durable_agents.examples.refund import refund_agent

desk = Agent(
    name="desk",
    instructions="Answer the customer; hand any refund to the refund agent.",
    delegates=[delegate(refund_agent)],
    planning=False,
)
