"""The `run_tool` activity: one call of a user's tool, exactly once however often it is
attempted; and `evaluate_call`, an agent's approval rule run as an activity.

For a side effect: the ledger answers a key it has seen; otherwise the tool's function
is called with the key in its context (it passes the key to its provider, which honours
it too), then the ledger records the result. A crash at any instant between those steps
ends, after the retry, in exactly one effect.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities import observe
from durable_agents.activities.crash_points import CrashPoints
from durable_agents.activities.heartbeat import finish_even_if_cancelled, heartbeating
from durable_agents.activities.ledger import IdempotencyConflict, fingerprint
from durable_agents.activities.memory import BoundMemory
from durable_agents.activities.sql import store_call
from durable_agents.activities.store_holds import refuse_unless_held
from durable_agents.activities.stores import Stores
from durable_agents.workflows.activity_io import (
    CallVerdict,
    EvaluationInput,
    ToolCallInput,
    ToolOutcome,
)
from durable_agents.workflows.agent_records import AdoptedAgent
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import SubjectKey, TrustedKey
from durable_agents.workflows.registry import AgentRegistry
from durable_agents.workflows.rules import CallToReview, verdict_of
from durable_agents.workflows.signed_payments import signed_for_payments
from durable_agents.workflows.tools import Tool, ToolContext


class ToolActivities:
    def __init__(
        self,
        stores: Stores,
        crash_points: CrashPoints,
        registry: AgentRegistry,
        data_dir: Path,
        embed: Callable[[str], list[float]] | None = None,
        recall_caps: tuple[int, int] = (10, 8000),
        revoked_keys: Sequence[str] = (),
        subject_keys: Mapping[str, SubjectKey] | None = None,
        payment_keys: Mapping[str, TrustedKey] | None = None,
    ) -> None:
        self.stores = stores
        # Keys that must sign the decisions of agents that move money (empty: the agents'
        # own policies hold; AGENT_REQUIRE_SIGNED_PAYMENTS).
        self.payment_keys = dict(payment_keys or {})
        # Trusted keys this deployment revoked: every run it starts refuses them; keys that
        # grant subjects: every run it starts about a subject needs a grant by one.
        self.revoked_keys = tuple(revoked_keys)
        self.subject_keys = dict(subject_keys or {})
        self.crash_points = crash_points
        self.registry = registry
        self.data_dir = data_dir
        # Embeddings for memories searched by meaning (activities/memory.py: embedder).
        self.embed = embed
        # The worker's bound on a recall (count, bytes): an agent may declare less.
        self.recall_caps = recall_caps

    @activity.defn(name="run_tool")
    async def run_tool(self, call: ToolCallInput) -> ToolOutcome:
        refuse_shadow(call)
        await self.stores.pruned.refuse_pruned(call.run_id)
        # Before the ledger is asked or the tool called: a store without the run's past
        # would not know the effects it made either.
        await refuse_unless_held(
            self.stores.db, self.stores.transcript, call.run_id, call.result_seq, call.rows_written
        )
        spec = self._tool(call.name)
        with observe.tool_span(call, spec.risk.value) as span:
            async with heartbeating():
                outcome = await finish_even_if_cancelled(self._run(spec, call))
            observe.finish_tool_span(span, outcome)
        observe.count_effect(call, outcome)
        return outcome

    def _tool(self, name: str) -> Tool:
        spec = self.registry.tools.get(name)
        if spec is None:  # another worker may have it: retried, as a rolling deploy needs
            raise ApplicationError(f"this worker has no tool {name!r}", type="ToolNotHere")
        return spec

    async def _run(self, spec: Tool, call: ToolCallInput) -> ToolOutcome:
        args = _validated(spec, call)
        replayed = False
        if not spec.risk.has_effects:
            result = await self._invoke(spec, args, call)
        else:
            result, replayed = await self._effect_once(spec, args, call)
        text = render(result)
        message = {"role": "tool", "tool_call_id": call.tool_call_id, "content": text}
        await store_call(
            self.stores.db, self.stores.transcript.put, call.run_id, call.result_seq, message
        )
        return ToolOutcome(
            ok=not (isinstance(result, dict) and result.get("ok") is False),
            summary=preview(text),
            result_seq=call.result_seq,
            replayed_from_ledger=replayed,
        )

    async def _invoke(self, spec: Tool, args: BaseModel, call: ToolCallInput) -> Any:
        """Call the user's function: async in the loop, sync in a thread. What it raises
        goes to Temporal's retry policy; after the last attempt, to the model."""
        memory = self._memory(call)
        if memory is not None:  # the run holds copies of the namespace's memories now
            await asyncio.to_thread(memory.store.note_reader, memory.namespace, memory.run_id)
        ctx = ToolContext(
            run_id=call.run_id,
            step=call.step,
            tool_call_id=call.tool_call_id,
            attempt=activity.info().attempt,
            idempotency_key=call.key,
            data_dir=self.data_dir,
            heartbeat=activity.heartbeat,
            memory=memory,
        )
        kwargs = spec.call_arguments(args, ctx)
        assert spec.fn is not None
        try:
            if spec.is_async:
                result = await spec.fn(**kwargs)
            else:
                result = await asyncio.to_thread(spec.fn, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
        except ApplicationError:
            raise
        except Exception as err:
            raise ApplicationError(f"{type(err).__name__}: {err}", type=type(err).__name__) from err
        return _plain(result, spec.name)

    def _memory(self, call: ToolCallInput) -> BoundMemory | None:
        """A memory tool's store, on the run's namespace (sent by the workflow, never by
        the model), bounded as the run's agent declares."""
        if call.namespace is None:
            return None
        agent = self.registry.agents.get(call.agent or "")
        declared = agent.memory if agent is not None else None
        if declared is None:
            raise ApplicationError(f"this worker's agent {call.agent!r} has no memory")
        return BoundMemory(
            store=self.stores.memory,
            namespace=call.namespace,
            run_id=call.run_id,
            step=call.step,
            key=call.key,
            recall_limit=min(declared.recall_limit, self.recall_caps[0]),
            recall_bytes=min(declared.recall_bytes, self.recall_caps[1]),
            embed=self.embed if declared.search == "embeddings" else None,
        )

    async def _effect_once(
        self, spec: Tool, args: BaseModel, call: ToolCallInput
    ) -> tuple[Any, bool]:
        key = call.key
        if not key:
            raise ApplicationError(
                f"{call.name} has side effects and needs an idempotency key", non_retryable=True
            )
        digest = fingerprint(call.name, call.arguments)
        ledger = self.stores.ledger
        try:
            recorded = await store_call(self.stores.db, ledger.recorded, key, call.name, digest)
            if recorded is not None:
                return _unwrapped(recorded), True
            await self._reach("before_provider", call.name, key)
            result = await self._invoke(spec, args, call)
            await self._reach("after_provider", call.name, key)
            stored = await store_call(
                self.stores.db, ledger.record, key, call.run_id, call.name, digest, _wrapped(result)
            )
            await self._reach("after_ledger", call.name, key)
            return _unwrapped(stored), False
        except IdempotencyConflict as err:
            raise ApplicationError(
                str(err), type="IdempotencyConflict", non_retryable=True
            ) from err

    async def _reach(self, instant: str, tool: str, key: str) -> None:
        """A crash test's instant (the hook may block or kill: off the event loop)."""
        if self.crash_points.instant:
            await asyncio.to_thread(self.crash_points.reached, instant, tool, key)

    @activity.defn(name="resolve_agent")
    async def resolve_agent(self, name: str) -> AdoptedAgent:
        """The agent a run starts with, as this worker's code has it (a local activity:
        its answer is recorded in the run's history)."""
        agent = self.registry.agents.get(name)
        if agent is None:
            raise ApplicationError(f"this worker has no agent {name!r}", type="AgentNotHere")
        adopted = agent.adopted()
        adopted.policy = signed_for_payments(agent, adopted.policy, self.payment_keys)
        adopted.revoked_keys = list(self.revoked_keys)
        adopted.subject_keys = dict(self.subject_keys)
        return adopted

    @activity.defn(name="evaluate_call")
    async def evaluate_call(self, request: EvaluationInput) -> CallVerdict:
        """An agent's approval rule run as an activity; the workflow records the verdict."""
        rule = self.registry.evaluator(request.agent, request.rule)
        if rule is None:
            raise ApplicationError(
                f"this worker has no approval rule {request.rule!r} of agent {request.agent!r}",
                type="RuleNotHere",
            )
        review = CallToReview.model_validate(request.call)
        async with heartbeating():
            found = rule.fn(review)
            if inspect.isawaitable(found):
                found = await found
        verdict = verdict_of(found, request.rule)
        return CallVerdict(
            rule=request.rule, decision=verdict.decision, reason=preview(verdict.reason, 2000)
        )


def refuse_shadow(call: ToolCallInput) -> None:
    """A what-if shadow's call never acts: one reaching a production worker is refused
    (the workflow refuses a shadow off a what-if queue first; this holds if it did not)."""
    if call.shadow or call.shadow_of is not None:
        raise ApplicationError(
            f"{call.name}: a what-if shadow's call reached a production worker; refused",
            type="ShadowRefused",
            non_retryable=True,
        )


def _validated(spec: Tool, call: ToolCallInput) -> BaseModel:
    try:
        return spec.args_model.model_validate(call.arguments)
    except ValidationError as err:
        raise ApplicationError(
            f"{call.name}: invalid arguments reached the tool: {err}", non_retryable=True
        ) from err


def _plain(result: Any, tool: str) -> Any:
    """What the tool returned, as JSON-able data (a pydantic model becomes its JSON)."""
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json")
    try:
        json.dumps(result, default=str)
    except (TypeError, ValueError) as err:
        raise ApplicationError(
            f"{tool} returned something that is not JSON: {err}", non_retryable=True
        ) from err
    return result


# The ledger stores objects; a tool that returns anything else is stored wrapped.
_WRAPPED = "__value__"


def _wrapped(result: Any) -> dict[str, Any]:
    return result if isinstance(result, dict) and _WRAPPED not in result else {_WRAPPED: result}


def _unwrapped(stored: dict[str, Any]) -> Any:
    return stored[_WRAPPED] if set(stored) == {_WRAPPED} else stored


def render(result: Any) -> str:
    """The text the model reads as the tool's result: a string as it is, the rest as JSON."""
    if isinstance(result, str):
        return result
    return json.dumps(result, sort_keys=True, default=str)
