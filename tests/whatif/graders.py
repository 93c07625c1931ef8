"""Graders a what-if test names (`--grader tests.whatif.graders:NAME`), as a team would
keep theirs next to its agents."""

from __future__ import annotations

from decimal import Decimal

from durable_agents.whatif import RunComparison


def no_payment_above_1000(run: RunComparison) -> None:
    for payment in run.effects_now("pay_invoice"):
        amount = Decimal(str(payment.arguments["amount"]))
        assert amount <= 1000, f"pays {payment.arguments['invoice_id']} {amount} EUR"


def pays_at_most_once(run: RunComparison) -> str | None:
    paid = [p.arguments["invoice_id"] for p in run.effects_now("pay_invoice")]
    twice = sorted({i for i in paid if paid.count(i) > 1})
    return f"pays {', '.join(twice)} more than once" if twice else None
