"""The tools a run may call: argument models, declared risk, description.

This module is pure (no I/O) so that workflow code can validate the model's tool
arguments and decide approval itself, and the model activity can send the same
JSON schemas to the model.
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field


class ToolRisk(StrEnum):
    """How dangerous a tool is; policy turns this into 'needs a human' or not."""

    READ_ONLY = "read_only"
    SIDE_EFFECT = "side_effect"
    NEEDS_APPROVAL = "needs_approval"


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SubmitPlanArgs(ToolArgs):
    steps: list[Annotated[str, Field(min_length=1, max_length=300)]] = Field(
        min_length=1, max_length=5000
    )


class CompleteStepArgs(ToolArgs):
    summary: str = Field(min_length=1, max_length=1000)


class LookupInvoiceArgs(ToolArgs):
    invoice_id: str = Field(pattern=r"^INV-\d{3,10}$")


class EmailArgs(ToolArgs):
    to: str = Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", max_length=254)
    subject: str = Field(min_length=1, max_length=200)
    body: str = Field(min_length=1, max_length=20_000)


class PayInvoiceArgs(ToolArgs):
    invoice_id: str = Field(pattern=r"^INV-\d{3,10}$")
    amount: Decimal = Field(gt=0, max_digits=12, decimal_places=2)
    currency: str = Field(default="EUR", pattern=r"^[A-Z]{3}$")


class AskHumanArgs(ToolArgs):
    question: str = Field(min_length=1, max_length=2000)
    options: list[str] | None = Field(default=None, min_length=2, max_length=20)


class RefundArgs(ToolArgs):
    customer_email: str = Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", max_length=254)
    amount: Decimal = Field(gt=0, max_digits=12, decimal_places=2)
    currency: str = Field(default="EUR", pattern=r"^[A-Z]{3}$")
    reason: str = Field(min_length=1, max_length=500)


class FetchReportArgs(ToolArgs):
    report_id: str = Field(pattern=r"^[A-Za-z0-9-]{1,64}$")
    size_bytes: int = Field(ge=1, le=50_000_000)


class RecordProgressArgs(ToolArgs):
    step: int = Field(ge=1)
    note: str = Field(min_length=1, max_length=2000)


class ToolSpec(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    risk: ToolRisk
    args_model: type[ToolArgs]
    # Handled inside the workflow (plan bookkeeping, questions), never run as an activity.
    internal: bool = False
    # The argument holding an amount of money, for the run policy's payment threshold.
    amount_field: str | None = None

    def openai_schema(self) -> dict[str, object]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": _json_schema(self.args_model),
            },
        }


@cache
def _json_schema(args_model: type[ToolArgs]) -> dict[str, Any]:
    """Built once per tool: pydantic builds a schema afresh on every call, and every model
    call sends the tools' schemas."""
    return args_model.model_json_schema()


SUBMIT_PLAN = "submit_plan"
COMPLETE_STEP = "complete_step"
ASK_HUMAN = "ask_human"

TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            name=SUBMIT_PLAN,
            description="Submit the plan: an ordered list of short step titles.",
            risk=ToolRisk.READ_ONLY,
            args_model=SubmitPlanArgs,
            internal=True,
        ),
        ToolSpec(
            name=COMPLETE_STEP,
            description="Mark the current plan step as done, with a one-line summary.",
            risk=ToolRisk.READ_ONLY,
            args_model=CompleteStepArgs,
            internal=True,
        ),
        ToolSpec(
            name=ASK_HUMAN,
            description="Ask the human a question, optionally offering options; wait for "
            "the answer.",
            risk=ToolRisk.READ_ONLY,
            args_model=AskHumanArgs,
            internal=True,
        ),
        ToolSpec(
            name="lookup_invoice",
            description="Look up an invoice by id: vendor, amount, currency, status.",
            risk=ToolRisk.READ_ONLY,
            args_model=LookupInvoiceArgs,
        ),
        ToolSpec(
            name="draft_email",
            description="Save an email draft for later sending; returns the draft id.",
            risk=ToolRisk.SIDE_EFFECT,
            args_model=EmailArgs,
        ),
        ToolSpec(
            name="pay_invoice",
            description="Pay an invoice. Moves real money: a human must approve it.",
            risk=ToolRisk.NEEDS_APPROVAL,
            args_model=PayInvoiceArgs,
            amount_field="amount",
        ),
        ToolSpec(
            name="issue_refund",
            description="Refund a customer. Moves money; the run's policy sets when a "
            "human must approve.",
            risk=ToolRisk.SIDE_EFFECT,
            args_model=RefundArgs,
            amount_field="amount",
        ),
        ToolSpec(
            name="send_email",
            description="Send an email through the outbox.",
            risk=ToolRisk.SIDE_EFFECT,
            args_model=EmailArgs,
        ),
        ToolSpec(
            name="fetch_report",
            description="Fetch a report by id; reports can be very large.",
            risk=ToolRisk.READ_ONLY,
            args_model=FetchReportArgs,
        ),
        ToolSpec(
            name="record_progress",
            description="Append a progress note for a step to the run's notebook.",
            risk=ToolRisk.SIDE_EFFECT,
            args_model=RecordProgressArgs,
        ),
    )
}

PLAN_TOOLS: tuple[str, ...] = (SUBMIT_PLAN,)
STEP_TOOLS: tuple[str, ...] = tuple(name for name in TOOLS if name != SUBMIT_PLAN)


def tool_spec(name: str) -> ToolSpec | None:
    return TOOLS.get(name)
