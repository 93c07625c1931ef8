"""Whether a person must say yes before a tool runs. Decided here, in workflow code, from
the tool's declared risk and the run's policy: never from anything the model wrote
(docs/architecture.md, invariant 5). Who may say it is the policy's own rule
(`RunPolicy.may_decide`, with the tools' declared approvers, `take_tool_approvers`).

The agent's own policy is a floor (`policy_floor`): whoever starts, schedules, forks or
plays a run may only tighten it (`loosening` says where a requested policy does not)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

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


def policy_floor(declared: RunPolicy | None, tool_approvers: dict[str, list[str]]) -> RunPolicy:
    """What the agent's author asks of every run: its declared policy (the default when it
    declares none) with its tools' declared approvers."""
    floor = (declared or RunPolicy()).model_copy(deep=True)
    floor.take_tool_approvers(tool_approvers)
    return floor


def loosening(
    requested: RunPolicy, floor: RunPolicy, *, decided_by_record: bool = False
) -> str | None:
    """Where a requested policy lets through what the agent's floor stops, in one line, or
    None when it only tightens it (docs/your-own-agent.md has the table). A what-if's runs
    are decided by the record, not by people (`decided_by_record`): signing is not asked."""
    problem = _looser_rules(requested, floor) or _looser_deciders(requested, floor)
    if problem is None and not decided_by_record:
        problem = _looser_signing(requested, floor)
    return None if problem is None else f"the requested policy loosens the agent's: {problem}"


def _looser_rules(requested: RunPolicy, floor: RunPolicy) -> str | None:
    if floor.approve_all_side_effects and not requested.approve_all_side_effects:
        return "approve_all_side_effects must stay on"
    threshold, wanted = floor.approve_payments_above, requested.approve_payments_above
    if threshold is not None and (wanted is None or wanted > threshold):
        return f"approve_payments_above must be {threshold} or less"
    spend, wanted_spend = (
        floor.approve_everything_after_spend_usd,
        requested.approve_everything_after_spend_usd,
    )
    if spend is not None and (wanted_spend is None or wanted_spend > spend):
        return f"approve_everything_after_spend_usd must be {spend} or less"
    return None


def _looser_deciders(requested: RunPolicy, floor: RunPolicy) -> str | None:
    for tool, allowed in sorted(floor.approvers.items()):
        wanted = requested.approvers.get(tool)
        if wanted is not None and not set(wanted) <= set(allowed):
            return f"approvers of {tool} must be among {sorted(allowed)}"
    if requested.on_timeout == "escalate":
        return _looser_escalation(requested.escalate_to, floor)
    return None


def _looser_escalation(escalate_to: list[str], floor: RunPolicy) -> str | None:
    """After an escalation only `escalate_to` decides (empty: anyone): they must be people
    the agent's policy lets decide then, or, where it never escalates, every tool's."""
    wanted = set(escalate_to)
    if floor.on_timeout == "escalate" and floor.escalate_to:
        if not (wanted and wanted <= set(floor.escalate_to)):
            return f"escalate_to must be among {sorted(floor.escalate_to)}"
        return None
    if floor.on_timeout == "escalate" and not wanted:
        return None  # after the escalation each tool's approvers decide, as the agent's do
    for tool, allowed in sorted(floor.approvers.items()):
        if not (wanted and wanted <= set(allowed)):
            return f"escalate_to must be among the approvers of {tool}: {sorted(allowed)}"
    return None


def _looser_signing(requested: RunPolicy, floor: RunPolicy) -> str | None:
    if floor.require_signed_decisions and not requested.require_signed_decisions:
        return "require_signed_decisions must stay on"
    if not (floor.require_signed_decisions or floor.trusted_keys):
        return None  # the agent trusts no key: any the request brings only tightens
    for key_id, key in sorted(requested.trusted_keys.items()):
        own = floor.trusted_keys.get(key_id)
        if own is None or own.public_key != key.public_key:
            return f"trusted key {key_id!r} is not one the agent trusts"
        if own.signs_for and not (key.signs_for and set(key.signs_for) <= set(own.signs_for)):
            return f"trusted key {key_id!r} may sign only for {sorted(own.signs_for)}"
    return None


def narrowed(floor: RunPolicy, handed: RunPolicy) -> RunPolicy:
    """The policy a parent hands a sub-agent: its own (`handed`) and the sub-agent's floor
    together, the tighter rule of each, so the child finds nothing in it that loosens its
    agent's floor (`loosening`), and nothing of the parent's own rules is lost."""

    def lowest(a: Any, b: Any) -> Any:
        return a if b is None else b if a is None else min(a, b)

    approvers = dict(handed.approvers)
    for tool, allowed in floor.approvers.items():
        wanted = approvers.get(tool)
        approvers[tool] = list(allowed) if wanted is None else sorted(set(wanted) & set(allowed))
    on_timeout, escalate_to = _narrowed_escalation(floor, handed)
    signing = floor.require_signed_decisions or handed.require_signed_decisions
    return RunPolicy(
        approve_all_side_effects=floor.approve_all_side_effects or handed.approve_all_side_effects,
        approve_payments_above=lowest(floor.approve_payments_above, handed.approve_payments_above),
        approve_everything_after_spend_usd=lowest(
            floor.approve_everything_after_spend_usd, handed.approve_everything_after_spend_usd
        ),
        approvers=approvers,
        decision_timeout_seconds=min(
            floor.decision_timeout_seconds, handed.decision_timeout_seconds
        ),
        on_timeout=on_timeout,
        escalate_to=escalate_to,
        require_signed_decisions=signing,
        trusted_keys=_narrowed_keys(floor, handed),
    )


def _narrowed_escalation(floor: RunPolicy, handed: RunPolicy) -> tuple[Any, list[str]]:
    """Escalate only where both escalate, to people both name; else reject."""
    if floor.on_timeout != "escalate" or handed.on_timeout != "escalate":
        return "reject", []
    if not floor.escalate_to:
        # After the agent's escalation each tool's approvers decide: only those of them.
        kept = [who for who in handed.escalate_to if _approves_every_tool(who, floor)]
        return "escalate", kept
    if not handed.escalate_to:
        return "escalate", list(floor.escalate_to)
    both = sorted(set(floor.escalate_to) & set(handed.escalate_to))
    return ("escalate", both) if both else ("reject", [])


def _narrowed_keys(floor: RunPolicy, handed: RunPolicy) -> dict[str, Any]:
    """Where the agent trusts keys, only those of them the parent trusts as well (the
    agent's own where none is shared); where it trusts none, the parent's."""
    if not (floor.require_signed_decisions or floor.trusted_keys):
        return dict(handed.trusted_keys)
    shared = {}
    for key_id, own in floor.trusted_keys.items():
        theirs = handed.trusted_keys.get(key_id)
        if theirs is None or theirs.public_key != own.public_key:
            continue
        narrower = bool(theirs.signs_for) and set(theirs.signs_for) <= set(
            own.signs_for or theirs.signs_for
        )
        shared[key_id] = theirs if narrower or not own.signs_for else own
    return shared or dict(floor.trusted_keys)


def _approves_every_tool(who: str, floor: RunPolicy) -> bool:
    return all(who in allowed for allowed in floor.approvers.values())
