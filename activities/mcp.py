"""MCP tools: the `list_mcp_tools` activity reads a server's tool list when a run starts,
and `call_mcp_tool` calls one tool, once per idempotency key.

The listing's names, risks and schema digests go into the history (a replay on a day
the server lists other tools reads the same record); the descriptions and schemas the
model is shown are kept in our store under the run. A call carries the idempotency key
in the request's `_meta`, so a server that honours it acts once however often we retry;
for a side effect, our ledger answers a key it has recorded without asking the server.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agents.activities.heartbeat import finish_even_if_cancelled, heartbeating
from durable_agents.activities.ledger import IdempotencyConflict, fingerprint
from durable_agents.activities.sql import store_call
from durable_agents.activities.store_holds import refuse_unless_held
from durable_agents.activities.stores import Stores
from durable_agents.activities.tools import refuse_shadow, render
from durable_agents.runtime.extras import require
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.activity_io import ToolCallInput, ToolOutcome
from durable_agents.workflows.agent_records import MCPListing, MCPListRequest, MCPToolSpec
from durable_agents.workflows.agents import MCPServer
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.registry import AgentRegistry
from durable_agents.workflows.tools import TOOL_NAME_PATTERN, digest_of

if TYPE_CHECKING:
    from mcp import Client

# What the server sees in `_meta`: the key of this call (stable across retries), the run.
META_KEY = "io.durable-agents/idempotency-key"
META_RUN = "io.durable-agents/run"
# The refusal's type: a call with no row count (`uncounted`).
UNCOUNTED = "StoreUncounted"
TOOLS_LISTED_MAX = 500


class MCPActivities:
    def __init__(self, settings: Settings, stores: Stores, registry: AgentRegistry) -> None:
        self.settings = settings
        self.stores = stores
        self.registry = registry

    def _server(self, agent_name: str, server_name: str) -> MCPServer:
        agent = self.registry.agents.get(agent_name)
        server = agent.mcp_server(server_name) if agent is not None else None
        if server is None:  # another worker may have it: retried, as a rolling deploy needs
            raise ApplicationError(
                f"this worker has no MCP server {server_name!r} of agent {agent_name!r}",
                type="MCPServerNotHere",
            )
        return server

    @contextlib.asynccontextmanager
    async def _connect(self, server: MCPServer) -> AsyncIterator[Client]:
        # Imported when a run first reaches an MCP server: the SDK takes most of a second
        # to import, which every worker and CLI process would otherwise pay.
        require("mcp", part="MCP tools", extra="mcp")
        import httpx2
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters

        if server.command is not None:
            program, *arguments = server.command
            env = {name: os.environ[name] for name in server.env_from_worker if name in os.environ}
            params = StdioServerParameters(
                command=program, args=arguments, env=env | dict(server.env)
            )
            async with Client(params, read_timeout_seconds=server.timeout) as client:
                yield client
            return
        assert server.url is not None
        headers = self.settings.mcp_headers.get(server.name, {})
        timeout = httpx2.Timeout(server.timeout)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
            Client(_HttpTransport(server.url, http), read_timeout_seconds=server.timeout) as client,
        ):
            yield client

    @activity.defn(name="list_mcp_tools")
    async def list_mcp_tools(self, request: MCPListRequest) -> MCPListing:
        server = self._server(request.agent, request.server)
        try:
            async with heartbeating(), self._connect(server) as client:
                listed = await _all_tools(client)
        except ApplicationError:
            raise
        except Exception as err:
            raise ApplicationError(
                f"MCP server {server.name} could not list its tools: {_why(err)}",
                type="MCPUnavailable",
            ) from err
        listing = MCPListing(server=server.name)
        shown: dict[str, Any] = {}
        for tool in listed[:TOOLS_LISTED_MAX]:
            name = server.prefix + tool.name
            if not _is_tool_name(name):
                listing.skipped.append(f"{tool.name}: not a name a model can call")
                continue
            schema = tool.input_schema or {"type": "object"}
            shown[name] = {"description": tool.description or tool.name, "parameters": schema}
            listing.tools.append(
                MCPToolSpec(
                    name=name,
                    mcp_name=tool.name,
                    risk=server.risk_of(tool.name),
                    schema_digest=digest_of(schema),
                )
            )
        if len(listed) > TOOLS_LISTED_MAX:
            listing.skipped.append(f"{len(listed) - TOOLS_LISTED_MAX} more tools: too many")
        await store_call(
            self.stores.db, self.stores.transcript.put_tool_list, request.run_id, server.name, shown
        )
        return listing

    @activity.defn(name="call_mcp_tool")
    async def call_mcp_tool(self, call: ToolCallInput) -> ToolOutcome:
        refuse_shadow(call)
        await self.stores.pruned.refuse_pruned(call.run_id)
        if call.rows_written is None:
            raise uncounted(call)
        await refuse_unless_held(
            self.stores.db, self.stores.transcript, call.run_id, call.result_seq, call.rows_written
        )
        if call.agent is None or call.mcp is None or call.mcp_name is None:
            raise ApplicationError(
                "call_mcp_tool needs agent, mcp and mcp_name", non_retryable=True
            )
        server = self._server(call.agent, call.mcp)
        async with heartbeating():
            return await finish_even_if_cancelled(self._call(server, call))

    async def _call(self, server: MCPServer, call: ToolCallInput) -> ToolOutcome:
        key = call.key
        replayed = False
        if key is None:
            ok, text = await self._ask(server, call, key)
        else:
            ok, text, replayed = await self._effect_once(server, call, key)
        message = {"role": "tool", "tool_call_id": call.tool_call_id, "content": text}
        await store_call(
            self.stores.db, self.stores.transcript.put, call.run_id, call.result_seq, message
        )
        return ToolOutcome(
            ok=ok, summary=preview(text), result_seq=call.result_seq, replayed_from_ledger=replayed
        )

    async def _effect_once(
        self, server: MCPServer, call: ToolCallInput, key: str
    ) -> tuple[bool, str, bool]:
        ledger, digest = self.stores.ledger, fingerprint(call.name, call.arguments)
        try:
            recorded = await store_call(self.stores.db, ledger.recorded, key, call.name, digest)
            if recorded is not None:
                return bool(recorded["ok"]), str(recorded["text"]), True
            ok, text = await self._ask(server, call, key)
            stored = await store_call(
                self.stores.db,
                ledger.record,
                key,
                call.run_id,
                call.name,
                digest,
                {"ok": ok, "text": text},
            )
            return bool(stored["ok"]), str(stored["text"]), False
        except IdempotencyConflict as err:
            raise ApplicationError(
                str(err), type="IdempotencyConflict", non_retryable=True
            ) from err

    async def _ask(
        self, server: MCPServer, call: ToolCallInput, key: str | None
    ) -> tuple[bool, str]:
        """One call to the server. A server that dies or cannot be reached is retried by
        Temporal (the key in `_meta` makes the retry safe); a tool that answers with an
        error is the model's to read, not retried."""
        meta: dict[str, Any] = {META_RUN: call.run_id}
        if key is not None:
            meta[META_KEY] = key
        try:
            async with self._connect(server) as client:
                result = await client.call_tool(
                    call.mcp_name or call.name,
                    call.arguments,
                    meta=meta,  # type: ignore[arg-type]
                )
        except Exception as err:
            raise ApplicationError(
                f"MCP server {server.name} failed during {call.mcp_name}: {_why(err)}",
                type="MCPUnavailable",
            ) from err
        return not result.is_error, _text_of(result)


class _HttpTransport:
    """The streamable-HTTP transport with our own HTTP client (its headers from settings)."""

    def __init__(self, url: str, http: Any) -> None:
        from mcp.client.streamable_http import streamable_http_client

        self._context = streamable_http_client(url, http_client=http)

    async def __aenter__(self) -> Any:
        return await self._context.__aenter__()

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._context.__aexit__(*exc)


async def _all_tools(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor or len(tools) > TOOLS_LISTED_MAX:
            return tools


def _text_of(result: Any) -> str:
    """What the model reads: the text parts, else the structured content as JSON."""
    texts = [part.text for part in result.content if getattr(part, "type", "") == "text"]
    if texts:
        return "\n".join(texts)
    if result.structured_content is not None:
        return render(result.structured_content)
    return json.dumps([part.model_dump(mode="json") for part in result.content])[:100_000]


def uncounted(call: ToolCallInput) -> ApplicationError:
    """The refusal of a call that carries no count of the run's transcript rows. Without
    one no store can be shown to hold the run's past (nor its ledger the effects the run
    made), so the call is refused, never taken as checked: every run counts from its
    start (a fork from its copy), and only a run from before the count carries none.
    Non-retryable: no worker could ever check it."""
    return ApplicationError(
        f"refused: MCP tool {call.name} of run {call.run_id} carries no count of the run's "
        "transcript rows, so no worker can tell its store holds the run's past",
        type=UNCOUNTED,
        non_retryable=True,
    )


def _is_tool_name(name: str) -> bool:
    return re.fullmatch(TOOL_NAME_PATTERN, name) is not None


def _why(err: BaseException) -> str:
    """A transport failure, in one line (anyio wraps them in exception groups)."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return preview(f"{type(err).__name__}: {err}", 300)
