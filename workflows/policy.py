"""Who must say yes before a tool runs. Decided here, in workflow code, from the tool's
declared risk and the run's policy: never from anything the model wrote (invariant 5)."""

from __future__ import annotations

from workflows.catalog import ToolRisk, ToolSpec
from workflows.contracts import RunPolicy


def needs_approval(spec: ToolSpec, policy: RunPolicy) -> bool:
    if spec.risk is ToolRisk.NEEDS_APPROVAL:
        return True
    return spec.risk is ToolRisk.SIDE_EFFECT and policy.approve_all_side_effects


def idempotency_key(run_id: str, step: int, tool_call_id: str) -> str:
    """Stable across retries, crashes and replays: made only of durable identifiers."""
    return f"{run_id}/step-{step}/{tool_call_id}"
