"""The invoice agent: look an invoice up, draft a confirmation, pay it (a person
approves), send the confirmation. `make demo` runs it."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from durable_agents import Agent, ToolContext, ToolRisk, tool
from durable_agents.examples.providers import ProviderConflict, providers_at

INVOICE_ID = Field(pattern=r"^INV-\d{3,10}$")
EMAIL_ADDRESS = Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", max_length=254)


class EmailArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    to: str = EMAIL_ADDRESS
    subject: str = Field(min_length=1, max_length=200)
    body: str = Field(min_length=1, max_length=20_000)


class PayInvoiceArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    invoice_id: str = INVOICE_ID
    amount: Decimal = Field(gt=0, max_digits=12, decimal_places=2)
    currency: str = Field(default="EUR", pattern=r"^[A-Z]{3}$")


def act(ctx: ToolContext, provider: str, operation: str, args: BaseModel) -> dict[str, Any]:
    """Ask a provider to act once under the call's idempotency key."""
    assert ctx.idempotency_key is not None  # side-effecting tools always get one
    service = getattr(providers_at(ctx.data_dir), provider)
    try:
        result: dict[str, Any] = service.call(
            ctx.idempotency_key, operation, args.model_dump(mode="json"), ctx.run_id
        )
    except ProviderConflict as err:
        return {"ok": False, "error": str(err)}
    return result


@tool
def lookup_invoice(ctx: ToolContext, invoice_id: Annotated[str, INVOICE_ID]) -> dict[str, Any]:
    """Look up an invoice by id: vendor, amount, currency, status."""
    return providers_at(ctx.data_dir).payments.lookup(invoice_id)


@tool(risk=ToolRisk.SIDE_EFFECT)
def draft_email(ctx: ToolContext, args: EmailArgs) -> dict[str, Any]:
    """Save an email draft for later sending; returns the draft id."""
    return act(ctx, "email", "draft", args)


@tool(risk=ToolRisk.NEEDS_APPROVAL, amount_field="amount")
def pay_invoice(ctx: ToolContext, args: PayInvoiceArgs) -> dict[str, Any]:
    """Pay an invoice. Moves real money: a human must approve it."""
    return act(ctx, "payments", "charge", args)


@tool(risk=ToolRisk.SIDE_EFFECT)
def send_email(ctx: ToolContext, args: EmailArgs) -> dict[str, Any]:
    """Send an email through the outbox."""
    return act(ctx, "email", "send", args)


invoice_agent = Agent(
    name="invoice",
    instructions="You pay vendors' invoices and confirm by email. Paying waits for a "
    "human; a rejection comes back as the tool's result.",
    tools=[lookup_invoice, draft_email, pay_invoice, send_email],
)
