"""A support-desk agent defined outside the core, as a user would: its own tools and its
own provider (a billing service that honours idempotency keys), only the public API.

Served by a worker with AGENT_MODULES=tests.agents.support_desk.
"""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from durable_agents import Agent, ToolContext, ToolRisk, tool

ORDER_ID = Field(pattern=r"^A-\d{4}$")


def billing(data_dir: Path) -> sqlite3.Connection:
    """The billing service's own database: refunds, one per idempotency key."""
    conn = sqlite3.connect(data_dir / "support-billing.sqlite3", timeout=30, isolation_level=None)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS refunds (key TEXT PRIMARY KEY, run_id TEXT, detail TEXT,"
        " replays INTEGER NOT NULL DEFAULT 0)"
    )
    return conn


def refunds(data_dir: Path, run_id: str) -> list[dict[str, Any]]:
    """The refunds the billing service made for a run (by workflow id or identity)."""
    rows = billing(data_dir).execute(
        "SELECT key, detail, replays FROM refunds WHERE run_id = ? OR run_id LIKE ?",
        (run_id, f"{run_id}@%"),
    )
    return [{"key": k, "detail": json.loads(d), "replays": r} for k, d, r in rows]


@tool
def look_up_order(order_id: Annotated[str, ORDER_ID]) -> dict[str, Any]:
    """Look up an order: its customer, amount and status."""
    return {"order_id": order_id, "customer": "jane@customer.example", "amount": "20.00"}


@tool(risk=ToolRisk.NEEDS_APPROVAL, amount_field="amount", approvers=["support-lead"])
def refund_order(
    ctx: ToolContext,
    order_id: Annotated[str, ORDER_ID],
    amount: Annotated[Decimal, Field(gt=0, decimal_places=2)],
) -> dict[str, Any]:
    """Refund an order. Moves money: a support lead approves."""
    detail = json.dumps({"order_id": order_id, "amount": str(amount)})
    conn = billing(ctx.data_dir)
    conn.execute("BEGIN IMMEDIATE")
    seen = conn.execute("SELECT 1 FROM refunds WHERE key = ?", (ctx.idempotency_key,)).fetchone()
    if seen:  # the key was used: answer as the first time, refund nothing again
        conn.execute(
            "UPDATE refunds SET replays = replays + 1 WHERE key = ?", (ctx.idempotency_key,)
        )
    else:
        conn.execute(
            "INSERT INTO refunds (key, run_id, detail) VALUES (?, ?, ?)",
            (ctx.idempotency_key, ctx.run_id, detail),
        )
    conn.execute("COMMIT")
    return {"ok": True, "refunded": str(amount), "order_id": order_id}


support_desk = Agent(
    name="support-desk",
    instructions="You help customers with their orders; refunds wait for a support lead.",
    tools=[look_up_order, refund_order],
    planning=False,
)
