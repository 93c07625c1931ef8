"""The console served inside an event loop that is already running (tests, the
benchmark): beside an in-process worker, over real HTTP on a free port."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI

# As production serves the console (console/__main__.py): the peer address is the TCP
# peer's, never an X-Forwarded-For header, which anyone can send (behind a proxy, the
# peer is the proxy: what AGENT_CONSOLE_TRUSTED_PROXIES names).
PROXY_HEADERS = False


@asynccontextmanager
async def serving(app: FastAPI, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve `app` until the block ends, as production does; yields its base URL."""
    config = uvicorn.Config(
        app,
        host=host,
        port=0,
        log_level="warning",
        timeout_graceful_shutdown=1,
        proxy_headers=PROXY_HEADERS,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:  # uvicorn offers no event for it
        if task.done():
            task.result()  # it failed to start: say why
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        await task
