"""The console's web application: pages, the event stream, sign-in.

Every page but sign-in and /health needs a signed-in user. Actions live in
console/actions.py; what both share is in console/web.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import Client

from durable_agents.console import actions, chat, events, memory, users, whatif
from durable_agents.console.deltas import BadEventId, Resume, resume_from
from durable_agents.console.identity import CSRF_FIELD, Identity
from durable_agents.console.throttle import OpenStreams, SignInThrottle, client_address
from durable_agents.console.views import Views
from durable_agents.console.web import (
    HERE,
    Console,
    PageError,
    SignInNeeded,
    at_the_door,
    console_of,
    proxy_refusal,
    read_form,
    render,
    run_state,
    signed_in,
    templates,
    wants_json,
)
from durable_agents.control.live import LiveReplies
from durable_agents.control.signer import kept_signer
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.records import RunStatus

# Sent with every response: no inline script or style runs, no other site frames a page,
# no file is sniffed into another type, no URL leaks to another site.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
# Password checks at once (each takes a core for ~50 ms); the rest wait without a thread.
PASSWORD_CHECKS_AT_ONCE = 2


class SafetyHeaders:
    """SECURITY_HEADERS on every response. Plain ASGI, not BaseHTTPMiddleware: that one
    wraps `receive`, and a live stream would no longer hear its reader leave."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, with_headers)


def create_app(settings: Settings, client: Client | None = None) -> FastAPI:
    """The console for these settings, on `client` (tests, the benchmark) or on a client
    connected at startup."""

    def build(connected: Client) -> Console:
        return Console(
            settings=settings,
            client=connected,
            identity=Identity(settings),
            views=Views(connected, settings.task_queue),
            signer=kept_signer(settings.console_key_path, settings.console_key_id),
            throttle=SignInThrottle(
                settings.console_signin_per_address_per_minute,
                settings.console_signin_failures_per_name,
            ),
            password_checks=asyncio.Semaphore(PASSWORD_CHECKS_AT_ONCE),
            streams=OpenStreams(settings.console_streams_per_user),
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if client is None:
            app.state.console = build(await connect(settings))
        yield

    app = FastAPI(
        title="durable-agents console",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        # Each route's declared role (console/roles.py: DOORS), checked before it reads.
        dependencies=[Depends(at_the_door)],
    )
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    app.add_middleware(SafetyHeaders)

    @app.exception_handler(SignInNeeded)
    async def _to_sign_in(request: Request, _: SignInNeeded) -> Response:
        if wants_json(request):
            return JSONResponse({"ok": False, "message": "sign in first"}, status_code=401)
        if console_of(request).identity.uses_proxy:
            return render(request, "error.html", {"message": proxy_refusal()}, status=401)
        return RedirectResponse("/login", status_code=303)

    @app.exception_handler(users.UsersFileError)
    async def _users_file(request: Request, err: users.UsersFileError) -> Response:
        return render_without_user(request, str(err))

    @app.exception_handler(PageError)
    async def _page_error(request: Request, err: PageError) -> Response:
        if wants_json(request):
            return JSONResponse({"ok": False, "message": err.message}, status_code=err.status)
        return render(request, "error.html", {"message": err.message}, status=err.status)

    if client is not None:
        app.state.console = build(client)
    _pages(app)
    actions.register(app)
    chat.register(app)
    memory.register(app)
    whatif.register(app)
    return app


async def stream_start(
    request: Request, run_id: str, after: int = 0, pos: int = 0
) -> AsyncIterator[Resume]:
    """Checked before the stream opens (a bad request is an error page, not a stream), and
    the person's place among their open streams held until the response is over: a
    dependency's teardown runs however the stream ends, its reader gone included."""
    user = signed_in(request)
    streams = console_of(request).streams
    if (refused := streams.refusal(user)) is not None:
        raise PageError(429, refused)
    if after < 0 or pos < 0:
        raise PageError(400, "after and pos must be whole numbers >= 0")
    try:
        start = resume_from(request.headers.get("last-event-id"), after, pos)
    except BadEventId as err:
        raise PageError(400, str(err)) from None
    await run_state(console_of(request), run_id)
    with streams.held_by(user):
        yield start


async def live_start(settings: Settings, run_id: str) -> int:
    """Where the page's live replies start (activities/stream.py: start_point); 0 when
    this console does not reach the stores."""
    live = LiveReplies.reachable(settings)
    if live is None:
        return 0
    try:
        return await asyncio.to_thread(live.store.start_point, run_id)
    finally:
        await live.close()


def render_without_user(request: Request, message: str) -> Response:
    """An error page that does not ask who is signed in (that is what failed)."""
    response = templates.TemplateResponse(
        request, "error.html", {"user": None, "csrf": "", "message": message}, status_code=500
    )
    return response


def _pages(app: FastAPI) -> None:
    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/login", response_class=HTMLResponse)
    async def login_page(request: Request) -> Response:
        return render(request, "login.html", {})

    @app.post("/login", response_class=HTMLResponse)
    async def login(request: Request) -> Response:
        console = console_of(request)
        form = await read_form(request)
        if not console.identity.csrf_ok(request, form.get(CSRF_FIELD)):
            raise PageError(403, "the form is stale or forged (CSRF token): reload and retry")
        if console.identity.uses_proxy:
            raise PageError(400, "this console signs people in through its proxy")
        name, password = form.get("name", "")[:200], form.get("password", "")[:1000]
        address = client_address(
            request.client.host if request.client else None,
            request.headers.get("x-forwarded-for"),
            console.settings.console_trusted_proxies,
        )
        if (refused := console.throttle.refusal(name, address)) is not None:
            raise PageError(429, refused)
        try:
            # Off the event loop, a few at a time: argon2 is slow on purpose, and a flood of
            # sign-ins must not stall every page and live stream.
            async with console.password_checks:
                ok = await asyncio.to_thread(
                    users.verify, console.settings.console_users_path, name, password
                )
        except users.UsersFileError as err:
            raise PageError(500, str(err)) from None
        if not ok:
            console.throttle.failed(name, address)
            context = {"flash": "wrong name or password", "name": name[:100]}
            return render(request, "login.html", context, status=401)
        console.identity.sign_in(request, name)
        response = RedirectResponse("/", status_code=303)
        console.identity.keep(request, response)
        return response

    @app.post("/logout")
    async def logout(request: Request) -> Response:
        console = console_of(request)
        form = await read_form(request)
        if not console.identity.csrf_ok(request, form.get(CSRF_FIELD)):
            raise PageError(403, "the form is stale or forged (CSRF token): reload and retry")
        console.identity.sign_out(request)
        response = RedirectResponse("/login", status_code=303)
        console.identity.keep(request, response)
        return response

    @app.get("/", response_class=HTMLResponse)
    async def inbox(request: Request, agent: str = "", tool: str = "") -> Response:
        user = signed_in(request)
        entries = await console_of(request).views.inbox(agent[:100], tool[:100])
        context = {"entries": entries, "agent": agent, "tool": tool, "me": user}
        return render(request, "inbox.html", context)

    @app.get("/runs", response_class=HTMLResponse)
    async def runs_page(request: Request, status: str = "", agent: str = "") -> Response:
        signed_in(request)
        if status and status not in {s.value for s in RunStatus}:
            raise PageError(400, f"no status {status[:40]!r}: one of the run statuses")
        rows = await console_of(request).views.runs(status, agent[:100])
        context = {"rows": rows, "status": status, "agent": agent, "statuses": list(RunStatus)}
        return render(request, "runs.html", context)

    @app.get("/runs/{run_id}", response_class=HTMLResponse)
    async def run_page(request: Request, run_id: str) -> Response:
        user = signed_in(request)
        console = console_of(request)
        state = await run_state(console, run_id)
        moments, after = await events.rendered_moments(state, events.Previews(console.settings))
        context = {
            "pos": await live_start(console.settings, run_id) if state.conversation else 0,
            "state": state,
            "me": user,
            "web_ui": console.settings.web_ui_url(run_id),
            "moments": moments,
            "after": after,
        }
        return render(request, "run.html", context)

    @app.get("/runs/{run_id}/panel", response_class=HTMLResponse)
    async def run_panel(request: Request, run_id: str) -> Response:
        """The live part of the run page, re-read when its status changes."""
        user = signed_in(request)
        state = await run_state(console_of(request), run_id)
        return render(request, "panel.html", {"state": state, "me": user})

    @app.get("/runs/{run_id}/events", response_class=EventSourceResponse)
    async def run_events(
        request: Request,
        run_id: str,
        start: Annotated[Resume, Depends(stream_start)],
        deltas: int = 0,
    ) -> AsyncIterator[ServerSentEvent]:
        """The run's events as SSE (docs/events.md); a reconnect resumes after Last-Event-ID.
        `deltas=1`: the live replies' pieces too. A person may hold a few streams open at
        once (AGENT_CONSOLE_STREAMS_PER_USER)."""
        console = console_of(request)
        streaming = events.stream(
            console.client, console.settings, run_id, start, deltas=bool(deltas)
        )
        async for item in streaming:
            yield item
