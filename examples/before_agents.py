"""The agent of runs whose request names none: runs started before agents existed, and
the benchmark's long runs. It has every example tool and the system prompt those runs
had, so they finish as they began."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from durable_agents import Agent, ToolContext, ToolRisk, tool
from durable_agents.examples.invoice import draft_email, lookup_invoice, pay_invoice, send_email
from durable_agents.examples.large_result import fetch_report
from durable_agents.examples.providers import providers_at
from durable_agents.examples.refund import issue_refund


@tool(risk=ToolRisk.SIDE_EFFECT)
def record_progress(
    ctx: ToolContext,
    step: Annotated[int, Field(ge=1)],
    note: Annotated[str, Field(min_length=1, max_length=2000)],
) -> dict[str, Any]:
    """Append a progress note for a step to the run's notebook."""
    assert ctx.idempotency_key is not None
    records = providers_at(ctx.data_dir).records
    params = {"step": step, "note": note}
    return records.call(ctx.idempotency_key, "note", params, ctx.run_id)


before_agents = Agent(
    name="before-agents",
    instructions="Tools that move money wait for a human; a rejection comes back as the "
    "tool's result.",
    tools=[
        lookup_invoice,
        draft_email,
        pay_invoice,
        issue_refund,
        send_email,
        fetch_report,
        record_progress,
    ],
)
