"""Signed decisions for the agents that move money, where a deployment asks for them
(AGENT_REQUIRE_SIGNED_PAYMENTS, docs/operations.md): the worker's `resolve_agent` makes
such an agent's policy require signatures by the deployment's trusted keys before a run
records it, so a replay reads the policy its run started with whatever the setting says
later. Outside workflow code: nothing here runs in a run's sandbox."""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import ValidationError

from durable_agents.workflows.agents import Agent
from durable_agents.workflows.contracts import RunPolicy, TrustedKey


def money_tools(agent: Agent) -> list[str]:
    """The tools through which the agent moves money: those that name an amount
    (`amount_field`), its own and its sub-agents' (a sub-agent runs under the policy its
    parent hands it, so the parent's must be signed)."""
    found: list[str] = []
    seen: set[str] = set()

    def walk(current: Agent) -> None:
        if current.name in seen:
            return
        seen.add(current.name)
        for tool in current.all_tools:
            if tool.amount_field is not None:
                found.append(tool.name if current is agent else f"{current.name}.{tool.name}")
            if isinstance(tool.delegate_agent, Agent):
                walk(tool.delegate_agent)

    walk(agent)
    return found


def signed_for_payments(
    agent: Agent, policy: RunPolicy | None, keys: Mapping[str, TrustedKey]
) -> RunPolicy | None:
    """The agent's policy with signed decisions required when it moves money and the
    deployment trusts keys for it; a policy that already requires them is the author's,
    and stays as it is."""
    if not keys or not money_tools(agent):
        return policy
    declared = policy or RunPolicy()
    if declared.require_signed_decisions:
        return policy
    return declared.model_copy(
        update={
            "require_signed_decisions": True,
            "trusted_keys": {**keys, **declared.trusted_keys},
        }
    )


def trusted_keys_from(text: str) -> dict[str, TrustedKey]:
    """The keys of a trusted keys file: what `agentctl signing console` (or `signing new`)
    prints, `{"trusted_keys": {id: {"public_key": ..., "signs_for": [...]}}}`, or the
    inner mapping alone. ValueError in one line when it cannot be used."""
    try:
        found = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err.msg}, line {err.lineno})") from None
    if isinstance(found, dict) and set(found) == {"trusted_keys"}:
        found = found["trusted_keys"]
    if not isinstance(found, dict) or not found:
        raise ValueError('no keys: give {"trusted_keys": {id: {"public_key": ...}}}')
    keys = {}
    for key_id, entry in found.items():
        try:
            keys[str(key_id)] = TrustedKey.model_validate(entry)
        except ValidationError as err:
            problem = err.errors()[0]
            raise ValueError(f"key {key_id!r}: {problem['msg']}") from None
    return keys
