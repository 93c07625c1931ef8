"""What a what-if worker does in place of a production worker's tools and model (the
workflow side is workflows/whatif.py).

A shadow's tool call never reaches the tool's provider: a call the recorded run made (the
same tool with the same arguments, the n-th such call taking the n-th recorded one) gets
the recorded result; any other side effect gets the tool's own simulation or a result
that says it was simulated. Read-only tools answer from the record too, or run for real
(`read_only="live"`). A model call is made live unless the recorded run's memo holds the
very same request: then its answer is reused and costs nothing. Every call a shadow makes
is logged here for the report (control/whatif_report.py).
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass, field
from typing import Any, Literal

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities.mcp import MCPActivities
from durable_agents.activities.model import ModelActivities, stored_reply
from durable_agents.activities.model_client import ModelRequest
from durable_agents.activities.sql import store_call
from durable_agents.activities.tools import ToolActivities, render
from durable_agents.workflows.activity_io import ModelCallInput, ToolCallInput, ToolOutcome
from durable_agents.workflows.agents import Agent
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.whatif import same_call_key

ReadOnly = Literal["recorded", "live"]
# Where a shadow's tool result came from.
Source = Literal["recorded", "simulated", "simulated by the tool", "live"]


@dataclass(frozen=True)
class RecordedCall:
    """One tool call of a recorded run: what the model read back, and whether it acted."""

    tool: str
    arguments: dict[str, Any]
    text: str
    ok: bool
    side_effect: bool


@dataclass(frozen=True)
class ShadowCall(RecordedCall):
    """One tool call of a shadow run: a recorded call's facts, and where its result came
    from."""

    source: Source


# How long a shadow's first activity waits for the what-if's start call to return.
START_WAIT_SECONDS = 60.0


@dataclass
class Recordings:
    """The recorded runs a what-if plays again (by their store keys), and the log of what
    their shadows called (by the shadows' store keys)."""

    calls: dict[str, list[RecordedCall]]
    read_only: ReadOnly = "recorded"
    # Tools with effects whatever the variant declares: those the recorded runs called as
    # side effects, and those production declares so (a variant that calls a payment
    # tool read-only must not make it run for real).
    effect_tools: frozenset[str] = frozenset()
    made: dict[str, list[ShadowCall]] = field(default_factory=dict)
    _taken: dict[str, set[int]] = field(default_factory=dict)
    # Each shadow call answered once, whatever Temporal retries: (shadow run, seq, call).
    _answered: dict[tuple[str, int, str], ShadowCall] = field(default_factory=dict)

    def __post_init__(self) -> None:
        recorded = {c.tool for calls in self.calls.values() for c in calls if c.side_effect}
        self.effect_tools = self.effect_tools | recorded

    # The shadows this what-if started (workflow id -> its run id, once the start returns):
    # its worker's activities serve these runs and their sub-agents, nobody else's.
    _starts: dict[str, asyncio.Future[str | None]] = field(default_factory=dict)

    def starting(self, workflow_id: str) -> None:
        """Before the what-if starts a shadow: its first activity may come before the start
        call returns, and waits for it (`admits`)."""
        self._starts[workflow_id] = asyncio.get_running_loop().create_future()

    def started(self, workflow_id: str, run_id: str | None) -> None:
        """The start returned (None: it failed)."""
        waiting = self._starts.get(workflow_id)
        if waiting is not None and not waiting.done():
            waiting.set_result(run_id)

    async def admits(self, workflow_id: str, run_id: str) -> bool:
        """Whether this what-if started this very run (its workflow id alone is not enough:
        a finished shadow's id may be started again by anyone)."""
        waiting = self._starts.get(workflow_id)
        if waiting is None:
            return False
        try:
            started = await asyncio.wait_for(asyncio.shield(waiting), START_WAIT_SECONDS)
        except TimeoutError:
            return False
        return started == run_id

    def answered(self, call: ToolCallInput) -> ShadowCall | None:
        return self._answered.get((call.run_id, call.result_seq, call.tool_call_id))

    def take(self, call: ToolCallInput) -> RecordedCall | None:
        """The recorded run's next unused call with this tool and these arguments."""
        recorded = self.calls.get(call.shadow_of or "")
        if recorded is None:
            return None
        taken = self._taken.setdefault(call.shadow_of or "", set())
        wanted = same_call_key(call.name, call.arguments)
        for index, found in enumerate(recorded):
            if index not in taken and same_call_key(found.tool, found.arguments) == wanted:
                taken.add(index)
                return found
        return None

    def log(self, call: ToolCallInput, made: ShadowCall) -> None:
        self._answered[(call.run_id, call.result_seq, call.tool_call_id)] = made
        self.made.setdefault(call.run_id, []).append(made)


def simulated(tool: str) -> dict[str, Any]:
    """What a shadow's model reads for a side effect the recorded run never had."""
    return {
        "ok": True,
        "simulated": True,
        "note": f"what-if: {tool} was not called; the recorded run made no such call, so "
        "this result is simulated",
    }


class ShadowToolActivities(ToolActivities):
    """`run_tool` and `call_mcp_tool` for shadows: nothing with an effect is ever called."""

    def __init__(self, tools: ToolActivities, mcp: MCPActivities, recordings: Recordings) -> None:
        super().__init__(
            tools.stores,
            tools.crash_points,
            tools.registry,
            tools.data_dir,
            tools.embed,
            tools.recall_caps,
        )
        self.mcp = mcp
        self.recordings = recordings

    @activity.defn(name="run_tool")
    async def run_tool(self, call: ToolCallInput) -> ToolOutcome:
        return await self._shadow_call(call, mcp=False)

    @activity.defn(name="call_mcp_tool")
    async def call_mcp_tool(self, call: ToolCallInput) -> ToolOutcome:
        return await self._shadow_call(call, mcp=True)

    async def _shadow_call(self, call: ToolCallInput, *, mcp: bool) -> ToolOutcome:
        if not call.shadow:
            raise ApplicationError(
                "a what-if worker runs shadows only", type="ShadowRefused", non_retryable=True
            )
        made = self.recordings.answered(call)
        if made is None:
            made = await self._answer(call, mcp=mcp)
            self.recordings.log(call, made)
        message = {"role": "tool", "tool_call_id": call.tool_call_id, "content": made.text}
        await store_call(
            self.stores.db, self.stores.transcript.put, call.run_id, call.result_seq, message
        )
        return ToolOutcome(ok=made.ok, summary=preview(made.text), result_seq=call.result_seq)

    async def _answer(self, call: ToolCallInput, *, mcp: bool) -> ShadowCall:
        # The workflow sends a key when the variant's tool has effects; the record and
        # production's declarations count too.
        effect = call.key is not None or call.name in self.recordings.effect_tools
        if effect or self.recordings.read_only == "recorded":
            recorded = self.recordings.take(call)
            if recorded is not None:
                return self._made(call, "recorded", recorded.ok, recorded.text, effect)
        if effect:
            spec = None if mcp else self.registry.tools.get(call.name)
            if spec is not None and spec.simulate is not None:
                result = spec.simulate(spec.args_model.model_validate(call.arguments))
                if inspect.isawaitable(result):
                    result = await result
                text = render(result)
                ok = not (isinstance(result, dict) and result.get("ok") is False)
                return self._made(call, "simulated by the tool", ok, text, effect)
            return self._made(call, "simulated", True, render(simulated(call.name)), effect)
        live = call.model_copy(update={"shadow": None, "shadow_of": None})
        if mcp:
            outcome = await self.mcp.call_mcp_tool(live)
        else:
            outcome = await ToolActivities.run_tool(self, live)
        stored = await store_call(
            self.stores.db, self.stores.transcript.read_one, call.run_id, call.result_seq
        )
        text = str((stored or {}).get("content") or outcome.summary)
        return self._made(call, "live", outcome.ok, text, effect)

    @staticmethod
    def _made(call: ToolCallInput, source: Source, ok: bool, text: str, effect: bool) -> ShadowCall:
        return ShadowCall(
            tool=call.name,
            arguments=call.arguments,
            text=text,
            ok=ok,
            side_effect=effect,
            source=source,
        )


class ShadowModelActivities(ModelActivities):
    """`call_model` for shadows: live, unless the recorded run's memo answers the very
    same request (then it costs no tokens)."""

    def __init__(self, model: ModelActivities, recorded: set[str]) -> None:
        super().__init__(model.settings, model.stores, model.registry, model.make_client)
        # Only the runs this what-if recorded: a start request cannot point a shadow at
        # another run's memo.
        self.recorded = recorded

    @activity.defn(name="call_model")
    async def call_model(self, call: ModelCallInput) -> Any:
        return await super().call_model(call)

    def _prepare(
        self, call: ModelCallInput, agent: Agent, model_name: str
    ) -> tuple[ModelRequest, str, dict[str, Any] | None, str | None]:
        request, digest, stored, over = super()._prepare(call, agent, model_name)
        if stored is None and call.shadow_of in self.recorded:
            stored = self.stores.transcript.recall(call.shadow_of or "", call.reply_seq, digest)
            if stored is not None:  # the shadow's own memo holds it now, as if it were asked
                message = stored_reply(stored).as_message()
                self.stores.transcript.remember(
                    call.run_id, call.reply_seq, digest, stored, message
                )
                over = None
        return request, digest, stored, over
