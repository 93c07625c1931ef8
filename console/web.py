"""What the console's pages and actions share: its state, who is signed in, errors,
rendering and reading a form."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from durable_agents.console import events
from durable_agents.console.identity import CSRF_FIELD, Identity
from durable_agents.console.roles import DOORS, Role, refusal, roles_of
from durable_agents.console.throttle import OpenStreams, SignInThrottle
from durable_agents.console.views import Views, countdown
from durable_agents.control.runs import WEDGED, handle, one_line_of, wedged
from durable_agents.control.signer import Signer
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.contract_base import RUN_ID_PATTERN
from durable_agents.workflows.run_summary import progress_line
from durable_agents.workflows.state import RunState

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=HERE / "templates")
templates.env.globals["countdown"] = countdown
templates.env.globals["CSRF_FIELD"] = CSRF_FIELD
templates.env.globals["progress_line"] = progress_line
MAX_FORM_FIELDS = 20
MAX_FIELD_BYTES = 64 * 1024
MAX_BODY_BYTES = 256 * 1024


@dataclass
class Console:
    settings: Settings
    client: Client
    identity: Identity
    views: Views
    signer: Signer
    throttle: SignInThrottle
    password_checks: asyncio.Semaphore
    streams: OpenStreams


class SignInNeeded(Exception):
    pass


class PageError(Exception):
    """A request the console refuses: its status and one line for the person."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def console_of(request: Request) -> Console:
    found: Console = request.app.state.console
    return found


def signed_in(request: Request) -> str:
    user = console_of(request).identity.user(request)
    if user is None:
        raise SignInNeeded
    return user


async def at_the_door(request: Request) -> None:
    """Every route's first check: its declared role (console/roles.py: DOORS), before its
    request is read."""
    route = request.scope.get("route")
    name = getattr(route, "name", None) or "?"
    door = DOORS.get(name)
    if door is None:
        raise PageError(403, f"route {name} has no declared role (console/roles.py: DOORS)")
    if door.role is Role.ANYONE:
        return
    user = signed_in(request)
    refused = refusal(console_of(request).settings, user, door)
    if refused is not None:
        raise PageError(403, refused)


def render(request: Request, name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    console = console_of(request)
    identity = console.identity
    session = identity.session(request)
    user = identity.user(request)
    page_context = {
        "user": user,
        "roles": roles_of(console.settings, user),
        "csrf": session.csrf,
        "flash": context.pop("flash", None) or identity.take_flash(request),
        "proxy_mode": identity.uses_proxy,
        "now": datetime.now(UTC),
        **context,
    }
    response = templates.TemplateResponse(request, name, page_context, status_code=status)
    identity.keep(request, response)
    return response


def check_run_id(run_id: str) -> str:
    if not re.fullmatch(RUN_ID_PATTERN, run_id):
        raise PageError(404, f"no run with id {run_id[:80]!r}")
    return run_id


# How long a page waits for a run's worker to answer before saying why it did not.
QUERY_SECONDS = 10.0


async def run_state(console: Console, run_id: str) -> RunState:
    """The run's state, or a page error in one line: unknown (404), or no answer (503,
    wedged or no worker) within QUERY_SECONDS instead of a page that hangs."""
    check_run_id(run_id)
    described = await _described(console, run_id)
    if described is None or described.task_queue != console.settings.task_queue:
        # Another deployment's run (or none): this console neither shows nor acts on it.
        raise PageError(404, f"no run with id {run_id} in this deployment")
    if described.raw_description.pending_workflow_task.attempt >= 2:
        # A query would wait for a task that keeps failing.
        raise PageError(503, str(wedged(run_id)))
    try:
        state: RunState = await handle(console.client, run_id).query(
            "state", result_type=RunState, rpc_timeout=timedelta(seconds=QUERY_SECONDS)
        )
        return state
    except WorkflowQueryFailedError as err:
        raise PageError(503, f"run {run_id} could not answer: {one_line_of(err.message)}") from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise PageError(404, f"no run with id {run_id}") from None
        if WEDGED in err.message or await _wedged(console, run_id):
            raise PageError(503, str(wedged(run_id))) from None
        raise PageError(503, f"no worker answered for {run_id} ({err.message})") from None


async def _described(console: Console, run_id: str) -> WorkflowExecutionDescription | None:
    """What Temporal says of the run (None: no such run)."""
    try:
        return await handle(console.client, run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise PageError(503, f"cannot ask Temporal about {run_id}: {err.message}") from None


async def _wedged(console: Console, run_id: str) -> bool:
    """Whether the run's workflow task has failed more than once in a row."""
    try:
        described = await handle(console.client, run_id).describe()
    except RPCError:
        return False
    return described.raw_description.pending_workflow_task.attempt >= 2


def wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def proxy_refusal() -> str:
    return "this console signs people in through a proxy, and the request did not come from it"


async def read_form(request: Request) -> dict[str, str]:
    """The form's text fields, bounded and unambiguous: a body without a length or over
    MAX_BODY_BYTES (411, 413), too many fields, a field too large, a file or a field given
    twice (400) is refused before anything is acted on."""
    length = request.headers.get("content-length")
    if length is None or not length.isdigit():
        raise PageError(411, "a form must say its length (Content-Length)")
    if int(length) > MAX_BODY_BYTES:
        raise PageError(413, f"the form is larger than {MAX_BODY_BYTES // 1024} KB")
    try:
        form = await request.form(
            max_files=0, max_fields=MAX_FORM_FIELDS, max_part_size=MAX_FIELD_BYTES
        )
    except Exception as err:  # starlette's MultiPartException, a bad encoding, …
        raise PageError(400, f"malformed form: {events.one_line(err)}") from None
    items = form.multi_items()
    fields: dict[str, str] = {}
    for key, value in items:
        if not isinstance(value, str):
            raise PageError(400, "malformed form: files are not taken here")
        if key in fields:
            raise PageError(400, f"malformed form: {key[:40]!r} is given twice")
        fields[key] = value
    return fields
