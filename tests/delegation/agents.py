"""Agents for the delegation and budget tests: a triage agent that hands research to a
research agent, which looks things up (and may refund, a side effect)."""

from __future__ import annotations

from durable_agents import Agent, ToolContext, ToolRisk, delegate, tool
from durable_agents.testing import ScriptedModel, call, say


@tool
def look_up(topic: str) -> str:
    """Look a topic up in the knowledge base."""
    return f"notes on {topic}: it is 42"


@tool(risk=ToolRisk.SIDE_EFFECT)
def file_report(title: str, ctx: ToolContext) -> dict[str, str]:
    """File a report (a side effect, once per idempotency key)."""
    path = ctx.data_dir / "reports.log"
    with path.open("a") as handle:
        handle.write(f"{ctx.idempotency_key} {title}\n")
    return {"filed": title}


research = Agent(
    name="research",
    instructions="Research the task you are given and answer in one paragraph.",
    tools=[look_up, file_report],
    planning=False,
)

triage = Agent(
    name="triage",
    instructions="Triage the ticket; hand research to the research agent.",
    delegates=[delegate(research)],
    planning=False,
)


def model_with_a_report() -> ScriptedModel:
    """Triage delegates; research looks up, files a report (a side effect), answers."""
    return ScriptedModel(
        [call("ask_research", task="Report on X"), say("Triaged.")],
        agents={
            "research": [
                call("look_up", topic="X"),
                call("file_report", title="X"),
                say("Reported on X."),
            ]
        },
    )
