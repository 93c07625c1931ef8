"""An MCP server for the tests, built with the `mcp` package: over stdio (`python -m
tests.mcp.server DIR`) or streamable HTTP (`... DIR --http PORT --token T`).

It writes every call, with the idempotency key of its `_meta`, to DIR/calls.jsonl. Its
tool list is v1 until DIR/tools-v2 exists. `flaky` kills the server in the middle of its
first call (DIR/died marks it), as a crashing server would. Over HTTP, each request must
carry `Authorization: Bearer T`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

KEY = "io.durable-agents/idempotency-key"
DIR = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")


def record(tool: str, ctx: Context, **arguments: Any) -> str | None:
    meta = ctx.request_context.meta or {}
    key = meta.get(KEY)
    with (DIR / "calls.jsonl").open("a") as log:
        log.write(json.dumps({"tool": tool, "key": key, "arguments": arguments}) + "\n")
    return str(key) if key else None


def authorized(ctx: Context) -> bool:
    token = os.environ.get("TEST_MCP_TOKEN")
    request = ctx.request_context.request
    if not token or request is None:
        return True
    return bool(request.headers.get("authorization") == f"Bearer {token}")


server = MCPServer("test-tools")


@server.tool()
def echo(text: str, ctx: Context) -> str:
    """Say the text back."""
    if not authorized(ctx):
        raise PermissionError("no valid token")
    record("echo", ctx, text=text)
    return f"echo: {text}"


@server.tool()
def charge(amount: int, ctx: Context) -> str:
    """Charge an amount (once per idempotency key)."""
    key = record("charge", ctx, amount=amount)
    done = DIR / "charged.json"
    charged = json.loads(done.read_text()) if done.exists() else {}
    if key not in charged:
        charged[str(key)] = amount
        done.write_text(json.dumps(charged))
    return f"charged {amount} (charges: {len(charged)})"


@server.tool()
def flaky(text: str, ctx: Context) -> str:
    """Answer, once the server has died in the middle of the first call."""
    record("flaky", ctx, text=text)
    marker = DIR / "died"
    if not marker.exists():
        marker.write_text("died")
        time.sleep(0.2)
        os._exit(1)
    return f"flaky: {text}"


@server.tool()
def wipe(ctx: Context) -> str:
    """Delete everything (declared by nobody: needs approval)."""
    record("wipe", ctx)
    return "wiped"


if (DIR / "tools-v2").exists():  # the server's list changed: wipe went, one tool came
    server.remove_tool("wipe")

    @server.tool()
    def archive(ctx: Context) -> str:
        """Archive everything."""
        record("archive", ctx)
        return "archived"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--http", type=int)
    options = parser.parse_args()
    if options.http:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
