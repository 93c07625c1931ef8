"""The demo's tools: invoices, payments, email drafts, an outbox and a progress notebook.

They keep their effects in SQLite tables beside the ledger, so a test can count what
really happened rather than what was logged.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from workflows.catalog import (
    EmailArgs,
    LookupInvoiceArgs,
    PayInvoiceArgs,
    RecordProgressArgs,
    RefundArgs,
)

DEMO_SCHEMA = """
CREATE TABLE IF NOT EXISTS invoices (
    invoice_id TEXT PRIMARY KEY, vendor TEXT NOT NULL, email TEXT NOT NULL,
    amount TEXT NOT NULL, currency TEXT NOT NULL, status TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS payments (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, idempotency_key TEXT NOT NULL,
    invoice_id TEXT NOT NULL, amount TEXT NOT NULL, currency TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE TABLE IF NOT EXISTS email_drafts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, idempotency_key TEXT NOT NULL,
    recipient TEXT NOT NULL, subject TEXT NOT NULL, body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, idempotency_key TEXT NOT NULL,
    recipient TEXT NOT NULL, subject TEXT NOT NULL, body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS refunds (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, idempotency_key TEXT NOT NULL,
    customer_email TEXT NOT NULL, amount TEXT NOT NULL, currency TEXT NOT NULL,
    reason TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS progress_notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, idempotency_key TEXT NOT NULL,
    step INTEGER NOT NULL, note TEXT NOT NULL
);
INSERT OR IGNORE INTO invoices VALUES
    ('INV-1001', 'ACME Office Supplies', 'billing@acme.example', '1250.00', 'EUR', 'open'),
    ('INV-1002', 'Globex Cloud', 'ar@globex.example', '89.90', 'EUR', 'open'),
    ('INV-1003', 'Initech Consulting', 'finance@initech.example', '4800.00', 'USD', 'paid');
"""


class EffectContext:
    """Who is acting: stamped on every effect row so effects can be counted per run."""

    def __init__(self, conn: sqlite3.Connection, run_id: str, key: str | None) -> None:
        self.conn = conn
        self.run_id = run_id
        self.key = key or ""


ToolResult = dict[str, Any]


def lookup_invoice(ctx: EffectContext, args: LookupInvoiceArgs) -> ToolResult:
    row = ctx.conn.execute(
        "SELECT * FROM invoices WHERE invoice_id=?", (args.invoice_id,)
    ).fetchone()
    if row is None:
        return {"ok": False, "error": f"invoice {args.invoice_id} not found"}
    return {"ok": True, "invoice": dict(row)}


def pay_invoice(ctx: EffectContext, args: PayInvoiceArgs) -> ToolResult:
    """Pay an open invoice once. The demo keeps books per run, so `make demo` can run again."""
    row = ctx.conn.execute(
        "SELECT * FROM invoices WHERE invoice_id=?", (args.invoice_id,)
    ).fetchone()
    if row is None:
        return {"ok": False, "error": f"invoice {args.invoice_id} not found"}
    paid = ctx.conn.execute(
        "SELECT 1 FROM payments WHERE invoice_id=? AND run_id=?", (args.invoice_id, ctx.run_id)
    ).fetchone()
    if row["status"] != "open" or paid is not None:
        return {"ok": False, "error": f"invoice {args.invoice_id} is already paid"}
    if Decimal(row["amount"]) != args.amount or row["currency"] != args.currency:
        return {
            "ok": False,
            "error": f"amount {args.amount} {args.currency} does not match the invoice "
            f"({row['amount']} {row['currency']})",
        }
    cursor = ctx.conn.execute(
        "INSERT INTO payments (run_id, idempotency_key, invoice_id, amount, currency)"
        " VALUES (?, ?, ?, ?, ?)",
        (ctx.run_id, ctx.key, args.invoice_id, str(args.amount), args.currency),
    )
    return {"ok": True, "payment_id": f"pay_{cursor.lastrowid}", "status": "paid"}


def draft_email(ctx: EffectContext, args: EmailArgs) -> ToolResult:
    cursor = ctx.conn.execute(
        "INSERT INTO email_drafts (run_id, idempotency_key, recipient, subject, body)"
        " VALUES (?, ?, ?, ?, ?)",
        (ctx.run_id, ctx.key, args.to, args.subject, args.body),
    )
    return {"ok": True, "draft_id": f"draft_{cursor.lastrowid}"}


def send_email(ctx: EffectContext, args: EmailArgs) -> ToolResult:
    cursor = ctx.conn.execute(
        "INSERT INTO outbox (run_id, idempotency_key, recipient, subject, body)"
        " VALUES (?, ?, ?, ?, ?)",
        (ctx.run_id, ctx.key, args.to, args.subject, args.body),
    )
    return {"ok": True, "message_id": f"msg_{cursor.lastrowid}", "status": "sent"}


def issue_refund(ctx: EffectContext, args: RefundArgs) -> ToolResult:
    cursor = ctx.conn.execute(
        "INSERT INTO refunds (run_id, idempotency_key, customer_email, amount, currency, reason)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (ctx.run_id, ctx.key, args.customer_email, str(args.amount), args.currency, args.reason),
    )
    return {"ok": True, "refund_id": f"ref_{cursor.lastrowid}", "status": "refunded"}


def record_progress(ctx: EffectContext, args: RecordProgressArgs) -> ToolResult:
    ctx.conn.execute(
        "INSERT INTO progress_notes (run_id, idempotency_key, step, note) VALUES (?, ?, ?, ?)",
        (ctx.run_id, ctx.key, args.step, args.note),
    )
    return {"ok": True, "recorded": f"step {args.step}"}


IMPLEMENTATIONS: dict[str, Callable[[EffectContext, Any], ToolResult]] = {
    "lookup_invoice": lookup_invoice,
    "pay_invoice": pay_invoice,
    "draft_email": draft_email,
    "send_email": send_email,
    "issue_refund": issue_refund,
    "record_progress": record_progress,
}


def render(result: ToolResult) -> str:
    """The text the model reads as the tool's result."""
    return json.dumps(result, sort_keys=True, default=str)
