"""Numbers a tool cannot take: NaN and infinities (as JSON constants, as strings, as a
literal too large for a float) are argument errors the model reads, never an amount that
slips past the payment threshold or fails the run's workflow task. Scripted model."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

from durable_agents import Agent, RunPolicy, ToolContext, ToolRisk, tool
from durable_agents.testing import AgentTestbed, ScriptedModel, call, say


class PayArgs(BaseModel):
    amount: float
    to: str


@tool(risk=ToolRisk.SIDE_EFFECT, amount_field="amount")
def pay(ctx: ToolContext, args: PayArgs) -> dict[str, Any]:
    """Pay someone."""
    return {"paid": args.amount, "key": ctx.idempotency_key}


payer = Agent(
    name="payer",
    instructions="Pay as the goal says.",
    tools=[pay],
    planning=False,
    policy=RunPolicy(approve_payments_above=Decimal("10")),
)


async def test_nan_and_infinite_amounts_are_argument_errors(time_env):
    model = ScriptedModel(
        [
            call("pay", amount=float("nan"), to="mallory").expecting_refusal(),  # JSON: NaN
            # A string pydantic makes nan:
            call("pay", amount="NaN", to="mallory").expecting_refusal(),
            call("pay", amount="-Infinity", to="mallory").expecting_refusal(),
            call("pay", amount=10**400, to="mallory").expecting_refusal(),  # past a float's range
            say("I could not pay."),
        ]
    )
    async with AgentTestbed(payer, model=model, env=time_env) as bed:
        run = await bed.start("payer", "Pay mallory")
        result = await asyncio.wait_for(run.result(), timeout=60)
        state = await run.state()
    assert result.status == "completed", result
    assert state.approvals == [] and state.effects.total == 0 and state.tool_calls == 0
    said = [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"]
    assert len(said) == 4, said
    assert "not a number a tool takes" in said[0]
    assert all("finite" in text for text in said[1:3]), said
    assert "amount" in said[3] and "pay" in said[3], said[3]


def test_a_label_that_cannot_travel_as_a_header_is_refused_at_start():
    import pytest
    from pydantic import ValidationError

    from durable_agents.workflows.contracts import RunRequest

    for label in ("café", "a\x1b[2Jb", "line\nbreak", "tab\there"):
        with pytest.raises(ValidationError, match="printable ASCII only"):
            RunRequest(goal="x", label=label)
    assert RunRequest(goal="x", label="pay-invoice?fault=plan:429*2").label


def test_run_headers_go_to_the_offline_model_only_unless_asked():
    from durable_agents.activities.model import openai_clients
    from durable_agents.runtime.settings import Settings
    from durable_agents.workflows.agents import Model

    offline = Settings()
    assert offline.uses_offline_model
    assert openai_clients(offline, None).run_headers  # type: ignore[attr-defined]
    hosted = Settings(openai_base_url="https://models.example.com/v1")
    assert not openai_clients(hosted, None).run_headers  # type: ignore[attr-defined]
    own = Model(name="m", base_url="https://gateway.example.com/v1")
    assert not openai_clients(offline, own).run_headers  # type: ignore[attr-defined]
    asked = hosted.model_copy(update={"model_run_headers": True})
    assert openai_clients(asked, own).run_headers  # type: ignore[attr-defined]
