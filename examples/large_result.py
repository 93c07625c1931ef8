"""The large-result agent: fetches a report that can be megabytes long. The transcript
store keeps it whole; the history carries a preview (docs/architecture.md)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from durable_agents import Agent, tool

REPORT_LINE = "quarterly figures: revenue, costs, margins, forecasts and risks.\n"


def report_text(size: int) -> str:
    """A deterministic report of exactly `size` characters."""
    return (REPORT_LINE * (size // len(REPORT_LINE) + 1))[:size]


@tool
def fetch_report(
    report_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9-]{1,64}$")],
    size_bytes: Annotated[int, Field(ge=1, le=50_000_000)],
) -> dict[str, Any]:
    """Fetch a report by id; reports can be very large."""
    return {"ok": True, "report_id": report_id, "text": report_text(size_bytes)}


large_result_agent = Agent(
    name="large-result",
    instructions="Fetch the reports the goal names and summarise them.",
    tools=[fetch_report],
)
