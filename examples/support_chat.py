"""The support chat: an agent people talk to. Run as a conversation, it answers each
message with a turn of its tool loop: it looks orders up on its own, and a refund waits
for a support lead's approval before any money moves (once per idempotency key, however
often the worker crashes). Replies stream to the console and `agentctl chat` as the model
writes them.

    agentctl chat support-chat --id chat-jane --subject customer=jane
    # talk to it (resume with the same id); it remembers Jane across conversations
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from durable_agents import Agent, Memory, ToolContext, ToolRisk, tool
from durable_agents.examples.invoice import act

ORDER_ID = Field(pattern=r"^A-\d{4}$")
# The shop's orders, as its order service would answer (the demo has no other shop).
ORDERS = {
    "A-1001": {"customer_email": "jane@customer.example", "amount": "20.00", "status": "shipped"},
    "A-1002": {"customer_email": "omar@customer.example", "amount": "75.50", "status": "late"},
}


class RefundOrderArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    order_id: Annotated[str, ORDER_ID]
    amount: Decimal = Field(gt=0, max_digits=12, decimal_places=2)


@tool
def look_up_order(order_id: Annotated[str, ORDER_ID]) -> dict[str, Any]:
    """Look up an order: its customer, amount and shipping status."""
    order = ORDERS.get(order_id)
    if order is None:
        return {"ok": False, "error": f"no order {order_id}"}
    return {"ok": True, "order_id": order_id, **order}


@tool(risk=ToolRisk.NEEDS_APPROVAL, amount_field="amount", approvers=["support-lead"])
def refund_order(ctx: ToolContext, args: RefundOrderArgs) -> dict[str, Any]:
    """Refund an order to its customer. Moves money: a support lead approves first."""
    order = ORDERS.get(args.order_id)
    if order is None:
        return {"ok": False, "error": f"no order {args.order_id}"}
    if args.amount > Decimal(order["amount"]):
        return {"ok": False, "error": f"{args.amount} is more than the order's {order['amount']}"}
    refund = _Refund(
        customer_email=order["customer_email"], amount=args.amount, reason=args.order_id
    )
    return act(ctx, "payments", "refund", refund)


class _Refund(BaseModel):
    customer_email: str
    amount: Decimal
    currency: str = "EUR"
    reason: str


support_chat = Agent(
    name="support-chat",
    instructions=(
        "You are the shop's support desk, talking with a customer. Look orders up before "
        "you answer about them; refund only what the customer asks, once."
    ),
    tools=[look_up_order, refund_order],
    planning=False,
    # What it learns about a customer (a preference, say) is kept for their next
    # conversations: `--subject customer=jane`. Without a customer, no memory.
    memory=Memory("customer/{customer}", optional=True),
)
