"""`python -m durable_agents.console`: serve the console (what `agentctl console` and
`agentctl up` run).

Its extra is checked before anything it brings is imported: without [console], one line
naming it, not a ModuleNotFoundError traceback."""

from __future__ import annotations

from durable_agents.runtime.extras import require_all_or_exit


def main() -> None:
    require_all_or_exit("the console", "console")
    import asyncio

    import uvicorn

    from durable_agents.activities.sql import redacted_url
    from durable_agents.activities.stores import open_database
    from durable_agents.console.app import create_app
    from durable_agents.console.identity import SecretTooShort, console_secret
    from durable_agents.console.serving import PROXY_HEADERS
    from durable_agents.console.sessions import SignedOutSessions
    from durable_agents.runtime.client import connect
    from durable_agents.runtime.connection import ConnectionSettingsError
    from durable_agents.runtime.settings import load_settings

    settings = load_settings()
    try:
        console_secret(settings)
    except SecretTooShort as err:  # before anything listens: a short secret fails closed
        print(f"console: {err}")
        raise SystemExit(2) from None
    try:  # sign-outs are kept there: without it no session could be checked
        SignedOutSessions(open_database(settings))
    except Exception as err:
        where = settings.database_url and redacted_url(settings.database_url)
        reason = " ".join(str(err).split())[:200]
        print(f"console: our stores' database ({where or settings.database_path}): {reason}")
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
