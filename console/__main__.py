"""`python -m console`: serve the console (what `agentctl console` and `agentctl up` run)."""

from __future__ import annotations

import asyncio

import uvicorn

from console.app import create_app
from console.identity import SecretTooShort, console_secret
from console.serving import PROXY_HEADERS
from worker.client import connect
from worker.connection import ConnectionSettingsError
from worker.settings import load_settings


def main() -> None:
    settings = load_settings()
    try:
        console_secret(settings)
    except SecretTooShort as err:  # before anything listens: a short secret fails closed
        print(f"console: {err}")
        raise SystemExit(2) from None
    try:
        asyncio.run(connect(settings))
    except (RuntimeError, ConnectionSettingsError) as err:  # said in one line
        print(f"console: {err}")
        raise SystemExit(2) from None
    uvicorn.run(
        create_app(settings),
        host=settings.console_host,
        port=settings.console_port,
        log_level="warning",
        proxy_headers=PROXY_HEADERS,
    )


if __name__ == "__main__":
    main()
