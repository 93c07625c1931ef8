"""A simulated payments provider: invoices to pay, charges and refunds.

The demo keeps books per run (an invoice is 'already paid' only within the run that
paid it) so `make demo` can be run again and again.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from sqlite3 import Connection
from typing import Any

from durable_agents.examples.providers.base import SimulatedProvider

SCHEMA = """
CREATE TABLE IF NOT EXISTS invoices (
    invoice_id TEXT PRIMARY KEY, vendor TEXT NOT NULL, email TEXT NOT NULL,
    amount TEXT NOT NULL, currency TEXT NOT NULL, status TEXT NOT NULL
);
INSERT OR IGNORE INTO invoices VALUES
    ('INV-1001', 'ACME Office Supplies', 'billing@acme.example', '1250.00', 'EUR', 'open'),
    ('INV-1002', 'Globex Cloud', 'ar@globex.example', '89.90', 'EUR', 'open'),
    ('INV-1003', 'Initech Consulting', 'finance@initech.example', '4800.00', 'USD', 'paid')
"""


class PaymentsProvider(SimulatedProvider):
    name = "payments"
    schema = SCHEMA

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.operations = {"charge": self._charge, "refund": self._refund}

    def lookup(self, invoice_id: str) -> dict[str, Any]:
        rows = self.query("SELECT * FROM invoices WHERE invoice_id=?", (invoice_id,))
        if not rows:
            return {"ok": False, "error": f"invoice {invoice_id} not found"}
        return {"ok": True, "invoice": rows[0]}

    def _charge(self, conn: Connection, run_id: str, params: dict[str, Any]) -> dict[str, Any]:
        invoice_id = params["invoice_id"]
        rows = conn.execute("SELECT * FROM invoices WHERE invoice_id=?", (invoice_id,)).fetchall()
        if not rows:
            return {"ok": False, "error": f"invoice {invoice_id} not found"}
        invoice = dict(rows[0])
        paid = conn.execute(
            "SELECT 1 FROM effects WHERE operation='charge' AND run_id=? AND detail LIKE ?",
            (run_id, f'%"invoice_id": "{invoice_id}"%'),
        ).fetchall()
        if invoice["status"] != "open" or paid:
            return {"ok": False, "error": f"invoice {invoice_id} is already paid"}
        amount, currency = Decimal(str(params["amount"])), params["currency"]
        if Decimal(invoice["amount"]) != amount or invoice["currency"] != currency:
            return {
                "ok": False,
                "error": f"amount {amount} {currency} does not match the invoice "
                f"({invoice['amount']} {invoice['currency']})",
            }
        return {"ok": True, "status": "paid", "invoice_id": invoice_id}

    def _refund(self, conn: Connection, run_id: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "status": "refunded", "to": params["customer_email"]}
