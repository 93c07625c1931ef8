"""A knowledge-base MCP server, built with the `mcp` package: what the research agent of
examples/triage.py reaches over stdio (`python -m durable_agents.examples.kb_server`) or
streamable HTTP (`python -m durable_agents.examples.kb_server --http PORT`).

`add_note` honours the idempotency key the agent sends in each request's `_meta`: a
retried call with the same key adds nothing. Notes live in KB_DIR, or in kb/ under
AGENT_DATA_DIR (default: .data/kb).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

IDEMPOTENCY_META = "io.durable-agents/idempotency-key"
SEED = {
    "refund policy": "Refunds within 30 days are approved by support; above 50 EUR a lead "
    "approves.",
    "shipping delays": "Carrier delays over 5 days earn a 10 EUR voucher.",
}

server = MCPServer("knowledge-base")


def _dir() -> Path:
    default = Path(os.environ.get("AGENT_DATA_DIR") or ".data") / "kb"
    path = Path(os.environ.get("KB_DIR") or default)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _notes() -> dict[str, Any]:
    file = _dir() / "notes.json"
    return json.loads(file.read_text()) if file.exists() else {"notes": dict(SEED), "keys": {}}


def _save(data: dict[str, Any]) -> None:
    file = _dir() / "notes.json"
    file.with_suffix(".tmp").write_text(json.dumps(data, sort_keys=True))
    file.with_suffix(".tmp").replace(file)


def idempotency_key(ctx: Context) -> str | None:
    meta = ctx.request_context.meta or {}
    key = meta.get(IDEMPOTENCY_META)
    return str(key) if key else None


@server.tool()
def search_notes(query: str) -> str:
    """Search the knowledge base; returns the matching notes."""
    words = query.lower().split()
    found = [
        f"{title}: {text}"
        for title, text in _notes()["notes"].items()
        if any(word in title or word in text.lower() for word in words)
    ]
    return "\n".join(found) or "no note matches"


@server.tool()
def add_note(title: str, text: str, ctx: Context) -> str:
    """Add a note to the knowledge base (once per idempotency key)."""
    data, key = _notes(), idempotency_key(ctx)
    if key and key in data["keys"]:
        return f"note {data['keys'][key]!r} was added already"
    data["notes"][title] = text
    if key:
        data["keys"][key] = title
    _save(data)
    return f"note {title!r} added"


@server.tool()
def purge_notes() -> str:
    """Delete every note. The agent does not declare it: a person approves each call."""
    _save({"notes": {}, "keys": _notes()["keys"]})
    return "all notes deleted"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP")
    options = parser.parse_args()
    if options.http:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
