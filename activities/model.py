"""The `call_model` activity: one chat completion, memoized by (run, seq, request).

The run's agent says which model, which instructions and which tools; a `ModelClient`
(activities/model_client.py) speaks to the endpoint. The client never retries by
itself; Temporal does, with our classification: requests the endpoint refused fail at
once, the rest retry, and a Retry-After becomes the next retry's delay.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import partial
from typing import Any, cast

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities import observe
from durable_agents.activities.fingerprints import fingerprint
from durable_agents.activities.heartbeat import heartbeating
from durable_agents.activities.model_client import (
    CallMeta,
    ModelClient,
    ModelRefused,
    ModelReply,
    ModelRequest,
    ModelUnavailable,
    ToolSchema,
    streaming,
)
from durable_agents.activities.model_setup import model_setup_hint
from durable_agents.activities.openai_chat import OpenAIChatClient, reply_from_wire
from durable_agents.activities.sql import store_call
from durable_agents.activities.store_holds import check_holds
from durable_agents.activities.stores import Stores
from durable_agents.activities.stream import LiveReply
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.activity_io import ModelCallInput, ModelTurn, TokenUsage, ToolCall
from durable_agents.workflows.agents import BEFORE_AGENTS, Agent, Model
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.prompts import system_prompt
from durable_agents.workflows.registry import AgentRegistry
from durable_agents.workflows.tools import INTERNAL_TOOLS

# Makes the client for an agent's model: (settings, the agent's model or None) -> client.
ClientFactory = Callable[[Settings, Model | None], ModelClient]


def openai_clients(settings: Settings, model: Model | None) -> ModelClient:
    """The agent's own client when it brings one; else the OpenAI-compatible client: the
    worker's endpoint, or the agent's own."""
    if model is not None and model.client is not None:
        return cast(ModelClient, model.client())
    if model is None or model.base_url is None:
        return OpenAIChatClient(
            settings.model_base_url,
            settings.model_api_key,
            run_headers=settings.uses_offline_model or settings.model_run_headers,
        )
    key = settings.key_from_environment(model.api_key_env) if model.api_key_env else None
    if model.api_key_env and not key:
        raise ApplicationError(
            f"the worker's environment has no {model.api_key_env}, which holds the key of "
            f"{model.base_url}",
            type="ModelKeyMissing",
        )
    return OpenAIChatClient(model.base_url, key or "no-key", run_headers=settings.model_run_headers)


class ModelActivities:
    def __init__(
        self,
        settings: Settings,
        stores: Stores,
        registry: AgentRegistry,
        clients: ClientFactory = openai_clients,
    ) -> None:
        self.settings = settings
        self.stores = stores
        self.registry = registry
        self.make_client = clients
        # Keys are read here, in the worker, from its own environment: never from a
        # workflow input, so they cannot reach the history (invariant 7).
        self._clients: dict[tuple[Any, ...], ModelClient] = {}

    def _client(self, model: Model | None) -> ModelClient:
        slot = (model.base_url, model.api_key_env, model.client) if model else (None, None, None)
        client = self._clients.get(slot)
        if client is None:
            client = self._clients[slot] = self.make_client(self.settings, model)
        return client

    @activity.defn(name="call_model")
    async def call_model(self, call: ModelCallInput) -> ModelTurn:
        if not call.shadow_of:
            await self.stores.pruned.refuse_pruned(call.run_id)
        async with heartbeating():
            return await self._call_model(call)

    async def _call_model(self, call: ModelCallInput) -> ModelTurn:
        agent = self._agent(call.agent or BEFORE_AGENTS)
        model_name = self._model_name(agent)
        provider = "offline" if self.settings.uses_offline_model else "openai"
        with observe.model_span(call, provider, model_name) as span:
            turn = await self._answer(call, agent, model_name)
            observe.finish_model_span(span, turn)
        observe.count_model_usage(turn)
        return turn

    def _agent(self, name: str) -> Agent:
        agent = self.registry.agents.get(name)
        if agent is None:  # another worker may have it: retried, as a rolling deploy needs
            raise ApplicationError(f"this worker has no agent {name!r}", type="AgentNotHere")
        return agent

    def _model_name(self, agent: Agent) -> str:
        model = agent.model_spec
        return model.name if model is not None else self.settings.effective_model_name

    async def _answer(self, call: ModelCallInput, agent: Agent, model_name: str) -> ModelTurn:
        request, digest, stored, over = await store_call(
            self.stores.db, self._prepare, call, agent, model_name
        )
        if stored is not None:
            reply = stored_reply(stored)
            if call.stream and not await self._shown_whole(call):
                # An attempt died after the reply was stored, before readers saw it end:
                # they see it once more, whole, and the cut segment is closed abandoned.
                async with self._live(call) as sink:
                    sink(reply.content or "")
            return _turn(call, reply, memoized=True)
        if over is not None:
            return ModelTurn(seq=call.reply_seq, over_budget=over)
        meta = CallMeta(
            run_id=call.run_id,
            seq=call.reply_seq,
            run_label=call.run_label,
            agent=agent.name,
            timeout_seconds=_seconds_left(),
        )
        client = self._client(agent.model_spec)
        # An unreachable default endpoint with nothing configured: the error says what to set.
        hint = partial(model_setup_hint, self.settings) if agent.model_spec is None else None
        streamer = streaming(client) if call.stream and self.settings.stream_replies else None
        if streamer is None:
            reply = await _classified(client.complete(request, meta), hint)
        else:
            # The segment ends `done` only once the reply is stored: a reader never sees a
            # finished reply that a retry would ask the model for again.
            async with self._live(call) as sink:
                reply = await _classified(streamer.stream(request, meta, sink), hint)
                await self._remember(call, digest, reply)
            return _turn(call, reply, memoized=False, settings=self.settings)
        await self._remember(call, digest, reply)
        return _turn(call, reply, memoized=False, settings=self.settings)

    async def _remember(self, call: ModelCallInput, digest: str, reply: ModelReply) -> None:
        await store_call(
            self.stores.db,
            self.stores.transcript.remember,
            call.run_id,
            call.reply_seq,
            digest,
            reply.model_dump(mode="json"),
            reply.as_message(),
        )

    async def _shown_whole(self, call: ModelCallInput) -> bool:
        run = activity.info().workflow_id or call.run_id
        return await store_call(self.stores.db, self.stores.live.finished, run, call.reply_seq)

    def _live(self, call: ModelCallInput) -> LiveReply:
        info = activity.info()
        run = info.workflow_id or call.run_id
        return LiveReply(self.stores.live, run, call.reply_seq, info.attempt)

    def _budgeted(self, call: ModelCallInput, request: ModelRequest) -> str | None:
        """What is left of the run's budget, applied to this call: None when it may be made
        (its reply capped, if need be, to what is left), else why not. The input is
        estimated from the request (4 characters a token); the output is what the cap
        allows, so a call never passes the budget by more than that estimate's error."""
        if call.budget_usd is None and call.budget_tokens is None:
            return None
        chars = len(request.system) + sum(
            len(str(m.get("content") or "")) for m in request.messages
        )
        tokens_in = chars // 4 + 1
        price_in = self.settings.price_input_per_mtok / 1_000_000
        price_out = self.settings.price_output_per_mtok / 1_000_000
        caps: list[int] = []
        if call.budget_tokens is not None:
            caps.append(call.budget_tokens - tokens_in)
        if call.budget_usd is not None:
            left = call.budget_usd - tokens_in * price_in
            if left < 0:
                cost = tokens_in * price_in
                return f"its input alone, about ${cost:.4f}, passes ${call.budget_usd:.4f} left"
            if price_out > 0:
                caps.append(int(left / price_out))
        if caps and min(caps) < MIN_REPLY_TOKENS:
            return f"about {tokens_in} tokens in leaves no room for a reply ({min(caps)} tokens)"
        if caps and min(caps) < UNCAPPED_TOKENS:
            request.max_output_tokens = min(caps)
        return None

    def _prepare(
        self, call: ModelCallInput, agent: Agent, model_name: str
    ) -> tuple[ModelRequest, str, dict[str, Any] | None, str | None]:
        """Store the appended messages, build the request from the store (capped to the
        budget), and look for an answer already given to it: (request, fingerprint, stored
        answer or None, why the budget forbids the call or None)."""
        transcript = self.stores.transcript
        # Before anything is written or asked: a store without the run's past is refused.
        check_holds(self.stores.db, transcript, call.run_id, call.reply_seq, call.rows_written)
        appended = [(m.seq, _message(m.model_dump())) for m in call.append]
        transcript.put_many(call.run_id, appended)
        history = transcript.read(call.run_id, call.reply_seq, window_from=call.context_from_seq)
        request = ModelRequest(
            model=model_name,
            system=system_prompt(agent.instructions, planning=agent.planning),
            messages=[clip_for_model(_for_model(message)) for message in history],
            tools=self._schemas(call),
            force_tool=call.force_tool,
        )
        over = self._budgeted(call, request)
        digest = fingerprint(request.fingerprinted())
        return request, digest, transcript.recall(call.run_id, call.reply_seq, digest), over

    def _schemas(self, call: ModelCallInput) -> list[ToolSchema]:
        """The tools' schemas: ours from the code, an MCP tool's as the run recorded it."""
        recorded: dict[str, Any] | None = None
        schemas = []
        for name in call.tools:
            spec = INTERNAL_TOOLS.get(name) or self.registry.tools.get(name)
            if spec is not None:
                schemas.append(
                    ToolSchema(name=spec.name, description=spec.description, parameters=spec.schema)
                )
                continue
            if recorded is None:
                recorded = self.stores.transcript.tool_lists(call.run_id)
            listed = recorded.get(name)
            if listed is None:
                raise ApplicationError(f"this worker has no tool {name!r}", type="ToolNotHere")
            schemas.append(ToolSchema(name=name, **listed))
        return schemas


async def _classified(
    answering: Awaitable[ModelReply], hint: Callable[[], str | None] | None = None
) -> ModelReply:
    """The client's reply; its failures as Temporal must treat them: a refused request
    fails at once, the rest retry (after the endpoint's Retry-After when it gave one). An
    unavailable model's error ends with `hint()` when it has one (no model configured)."""
    try:
        return await answering
    except ModelRefused as err:
        raise ApplicationError(str(err), type="ModelRequestRejected", non_retryable=True) from err
    except ModelUnavailable as err:
        delay = timedelta(seconds=err.retry_after) if err.retry_after is not None else None
        said = hint() if hint is not None else None
        message = f"{err}; {said}" if said else str(err)
        raise ApplicationError(message, type="ModelUnavailable", next_retry_delay=delay) from err


def stored_reply(stored: dict[str, Any]) -> ModelReply:
    """A memoized answer; rows of earlier versions hold the endpoint's raw response."""
    if "choices" in stored:
        return reply_from_wire(stored)
    return ModelReply.model_validate(stored)


def _seconds_left() -> float | None:
    """The HTTP timeout: what remains of the activity's start-to-close timeout."""
    timeout = activity.info().start_to_close_timeout
    return timeout.total_seconds() if timeout else None


# A reply capped below this many tokens is not worth a call: the budget waits instead.
MIN_REPLY_TOKENS = 16
# A cap this high is no cap: the request is sent as it would be without a budget.
UNCAPPED_TOKENS = 1_000_000
# A message longer than this goes to the model clipped, with a note; the transcript keeps
# it whole. A 10 MB tool result is stored, not sent: no model takes it, no payload nears it.
MODEL_MESSAGE_CHARS = 100_000
# Tool-call arguments longer than this are not carried into the workflow's history...
INLINE_ARGUMENT_CHARS = 32_000
# ...except the plan's (the forced tool of the planning turn): a plan of thousands of steps
# is carried once, and kept in the state anyway.
PLAN_ARGUMENT_CHARS = 512_000


def clip_for_model(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, str) or len(content) <= MODEL_MESSAGE_CHARS:
        return message
    note = (
        f"\n[clipped: {len(content):,} characters in all; the whole text is kept in the "
        "run's transcript store]"
    )
    return message | {"content": content[:MODEL_MESSAGE_CHARS] + note}


def _message(message: dict[str, Any]) -> dict[str, Any]:
    out = {"role": message["role"], "content": message["content"]}
    if message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    if message.get("speaker"):
        out["speaker"] = message["speaker"]
    return out


def _for_model(message: dict[str, Any]) -> dict[str, Any]:
    """A stored message as the model gets it: who spoke stays in the thread's record."""
    if "speaker" not in message:
        return message
    return {key: value for key, value in message.items() if key != "speaker"}


def _turn(
    call: ModelCallInput,
    reply: ModelReply,
    *,
    memoized: bool,
    settings: Settings | None = None,
) -> ModelTurn:
    cost = 0.0
    if settings is not None:
        cost = (
            reply.input_tokens * settings.price_input_per_mtok
            + reply.output_tokens * settings.price_output_per_mtok
        ) / 1_000_000
    carried = PLAN_ARGUMENT_CHARS if call.force_tool else INLINE_ARGUMENT_CHARS
    calls = [
        ToolCall(id=c.id, name=c.name, arguments="", oversized=len(c.arguments))
        if len(c.arguments) > carried
        # Kept whole in the transcript; the workflow only hears that it was too large.
        else ToolCall(id=c.id, name=c.name, arguments=c.arguments)
        for c in reply.tool_calls
    ]
    chars = call.preview_chars
    if not calls and call.answer_chars is not None:
        chars = call.answer_chars
    return ModelTurn(
        seq=call.reply_seq,
        content_preview=preview(reply.content, chars, single_line=chars <= 200),
        tool_calls=calls,
        finish_reason=reply.finish_reason,
        model=reply.model,
        # A memoized answer spent no tokens now: it was paid for when first given.
        usage=TokenUsage()
        if memoized
        else TokenUsage(
            input_tokens=reply.input_tokens, output_tokens=reply.output_tokens, cost_usd=cost
        ),
        memoized=memoized,
    )
