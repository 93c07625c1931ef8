"""A fresh start: its request, within its agent's policy, budget and limits (floors).
A cron run, a retry run, a what-if shadow and a Schedule's run are admitted as one: none
may carry a state (Temporal's record tells a cron or retry run from a continuation)."""

from __future__ import annotations

from durable_agents.workflows.beginnings.adopting import agent_recorded
from durable_agents.workflows.beginnings.start import Begun, Start, refuse


async def admits(run: Start, begun: Begun) -> None:
    """Refused if it carries a state; else opened and its agent recorded."""
    if begun.request.resumes:
        refuse(
            f"refused: a {begun.beginning.value} is never a continuation: it may not carry a state"
        )
    run.opened()
    await agent_recorded(run, begun.request)
