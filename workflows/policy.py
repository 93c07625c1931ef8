"""Whether a person must say yes before a tool runs. Decided here, in workflow code, from
the tool's declared risk and the run's policy: never from anything the model wrote
(docs/architecture.md, invariant 5). Who may say it is the policy's own rule
(`RunPolicy.may_decide`, with the tools' declared approvers, `take_tool_approvers`)."""

from __future__ import annotations

from decimal import Decimal

from pydantic import BaseModel

from durable_agents.workflows.activity_io import idempotency_key as idempotency_key
from durable_agents.workflows.agent_records import ToolRecord
from durable_agents.workflows.contracts import RunPolicy
from durable_agents.workflows.tools import ToolRisk


def approval_rule(
    spec: ToolRecord, args: BaseModel, policy: RunPolicy, spent_usd: float
) -> str | None:
    """Why this call needs a human, or None when it may run at once."""
    if spec.risk is ToolRisk.NEEDS_APPROVAL:
        return f"{spec.name} is declared as needing approval"
    budget = policy.approve_everything_after_spend_usd
    if budget is not None and spent_usd > budget:
        return f"the run has spent ${spent_usd:.4f}, over its ${budget:.4f} budget"
    if spec.risk is ToolRisk.SIDE_EFFECT and policy.approve_all_side_effects:
        return "the run's policy approves every side effect"
    threshold = policy.approve_payments_above
    if threshold is not None and spec.amount_field is not None:
        amount = Decimal(str(getattr(args, spec.amount_field)))
        if amount > threshold:
            return f"amount {amount} is above the run's approval threshold {threshold}"
    return None
