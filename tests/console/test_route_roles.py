"""Every door of the console, tried by everyone: each route of the app, by each method,
with each role the console knows, nobody signed in, and a forged and an expired cookie.
The table is the code's own: the routes are the app's, and who may pass each is its
declaration (console/roles.py: DOORS), so a route added is a route tried, and a route
the declaration misses fails here.

Who may pass a door gets past it (no 401 or 403). Who may not is refused in one line
with a form that would act (a decision, a budget raise, an answer, a message, a resume,
a fork...) and nothing changes: no signal or update reaches a run (its history is as it
was), no run is reset or forked, no memory is forgotten. Every POST also refuses a
missing or a wrong CSRF token, changing nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from itsdangerous import URLSafeTimedSerializer
from starlette.routing import Route
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agents.activities.stores import Stores
from durable_agents.console import users
from durable_agents.console.app import create_app
from durable_agents.console.identity import SESSION_COOKIE, console_secret
from durable_agents.console.roles import DOORS, Role, roles_held
from durable_agents.control import conversations, runs
from durable_agents.infra.offline_model.embedded import EmbeddedModelServer
from durable_agents.runtime.settings import Settings
from durable_agents.worker.main import build_worker
from durable_agents.workflows.contracts import RunPolicy, RunRequest
from durable_agents.workflows.records import Question
from durable_agents.workflows.state import RunState
from tests.conftest import eventually, run_id, settings_for
from tests.console.live import LiveConsole, csrf_of, live_console
from tests.console.runs_for_console import waiting_payment
from tests.console.test_console_hardening import SignedLongAgo, cookie_of


def app_routes(app: Any) -> list[Route]:
    """The app's routes (its static files' mount is no route: files only, for anyone)."""
    return [route for route in app.routes if isinstance(route, Route)]


ROUTES = app_routes(create_app(Settings()))
DOORWAYS = sorted(
    (route.name, method, route.path) for route in ROUTES for method in route.methods or ()
)
POSTS = sorted({name for name, method, _ in DOORWAYS if method == "POST"})

# The signed-in people, one for each role the console knows (and a viewer the operators
# list too: a viewer only is never more): their names, and the settings that list them.
SIGNED_IN: dict[str, tuple[str, tuple[str, ...]]] = {
    "viewer": ("vera", ("console_viewers",)),
    "viewer listed as operator": ("victor", ("console_viewers", "console_operators")),
    "approver": ("april", ()),
    "operator": ("otto", ("console_operators",)),
    "memory admin, a viewer": ("mia", ("console_viewers", "console_memory_admins")),
    "every role": ("eve", ("console_operators", "console_memory_admins")),
}
NOBODY = ("no session", "forged cookie", "expired cookie")
PERSONAS = [*SIGNED_IN, *NOBODY]
PASSWORD = "doors-password"
MEMORY_NAMESPACE = "customer/jane"  # the support agent's: this deployment's own


@dataclass
class Caller:
    persona: str
    user: str | None  # who the console must take them for: None, nobody
    http: httpx.AsyncClient
    csrf: str
    cookie: str | None = None  # nobody's: the one cookie they send, whatever they are sent

    def client(self) -> httpx.AsyncClient:
        """Their client; nobody's as it came (a page they read may set a new session)."""
        if self.user is None:
            self.http.cookies.clear()
            if self.cookie is not None:
                self.http.cookies.set(SESSION_COOKIE, self.cookie)
        return self.http


@dataclass
class World:
    settings: Settings
    client: Client
    console: LiveConsole
    pay: RunState  # waiting for its approval
    question: str  # waiting for an answer to `question_id`
    question_id: str
    chat: str  # waiting for a message
    callers: dict[str, Caller]

    def run_for(self, route: str) -> str:
        return {"answer": self.question, "send_message": self.chat}.get(route, self.pay.run_id)


# For each POST, a form that acts (on the run `World.run_for` names) if its door opens.
ACTING_FORMS: dict[str, Callable[[World], dict[str, str]]] = {
    "login": lambda w: {"name": SIGNED_IN["every role"][0], "password": PASSWORD},
    "logout": lambda w: {},
    "decide": lambda w: {
        "request_id": w.pay.pending_approvals[0].request_id,
        "decision": "approve",
    },
    "answer": lambda w: {"question_id": w.question_id, "answer": "INV-1002"},
    "budget": lambda w: {"tool_calls": "9", "usd": "100"},
    "send_message": lambda w: {"text": "hello from the door test"},
    "pause": lambda w: {"reason": "door test"},
    "resume": lambda w: {"reason": "door test"},
    "cancel": lambda w: {"reason": "door test"},
    "edit": lambda w: {"goal": "pay mallory instead"},
    "fork": lambda w: {"moment": "1"},
    "rewind": lambda w: {"moment": "1"},
    "forget": lambda w: {"namespace": MEMORY_NAMESPACE},
}
JSON = {"Accept": "application/json"}


def with_roles(settings: Settings) -> Settings:
    lists: dict[str, list[str]] = {
        "console_viewers": [],
        "console_operators": [],
        "console_memory_admins": [],
    }
    for name, listed_in in SIGNED_IN.values():
        for setting in listed_in:
            lists[setting].append(name)
    return settings.model_copy(update=lists)


async def quiet(client: Client, rid: str) -> None:
    """Once the run has nothing in flight (no workflow task, no activity): from then on
    only what someone sends it adds to its history."""

    async def settled() -> bool:
        raw = (await client.get_workflow_handle(rid).describe()).raw_description
        return not raw.HasField("pending_workflow_task") and not raw.pending_activities

    await eventually(settled)


async def sign_in(console: LiveConsole, persona: str, user: str) -> Caller:
    http = console.client()
    page = await http.get("/login")
    form = {"csrf": csrf_of(page.text), "name": user, "password": PASSWORD}
    assert (await http.post("/login", data=form)).status_code == 303
    home = await http.get("/")
    assert home.status_code == 200
    return Caller(persona, user, http, csrf_of(home.text))


def nobody(console: LiveConsole, everyone: Caller) -> list[Caller]:
    """No cookie; one signed with another secret for the user who holds every role; and
    the console's own signature on that user's session, dated past its lifetime."""
    session = URLSafeTimedSerializer(console_secret(console.settings), salt="console-session")
    real = session.loads(cookie_of(everyone.http))
    forger = URLSafeTimedSerializer("not-the-console-secret-" * 2, salt="console-session")
    old = URLSafeTimedSerializer(
        console_secret(console.settings), salt="console-session", signer=SignedLongAgo
    )
    return [
        Caller("no session", None, console.client(), ""),
        Caller("forged cookie", None, console.client(), real["csrf"], forger.dumps(real)),
        Caller("expired cookie", None, console.client(), real["csrf"], old.dumps(real)),
    ]


@pytest.fixture(scope="module")
async def world(
    dev_env: WorkflowEnvironment,
    model_server: EmbeddedModelServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[World]:
    """One worker, console and set of runs for the whole table: a payment waiting for its
    approval, a question waiting for its answer, a conversation waiting for a message;
    each policy lets anyone decide, so only the console's doors stand in the way."""
    client = dev_env.client
    data = tmp_path_factory.mktemp("route-roles") / "data"
    settings = with_roles(settings_for(client, data, model_server.port))
    for name, _ in SIGNED_IN.values():
        users.add_user(settings.console_users_path, name, PASSWORD)
    Stores.open(settings).memory.remember(
        MEMORY_NAMESPACE, "Jane prefers email", {}, key="k1", run_id="chat-9@abc", step=3
    )
    async with build_worker(client, settings), live_console(settings, client) as console:
        pay = await waiting_payment(client, settings, RunPolicy())
        question = run_id("ask")
        ask = RunRequest(goal="ask", agent="question", label="ask-human", policy=RunPolicy())
        await runs.start_run(client, settings, ask, question)
        chat = run_id("chat")
        opening = conversations.conversation_request("support-chat", label="chat")
        await conversations.open_conversation(client, settings, opening, chat)

        async def asked() -> list[Question]:
            return (await runs.get_summary(client, question)).pending_questions

        [waiting] = await eventually(asked)
        for rid in (pay.run_id, question, chat):
            await quiet(client, rid)
        callers = {p: await sign_in(console, p, name) for p, (name, _) in SIGNED_IN.items()}
        callers |= {c.persona: c for c in nobody(console, callers["every role"])}
        yield World(settings, client, console, pay, question, waiting.question_id, chat, callers)
        for caller in callers.values():
            await caller.http.aclose()
        for rid in await our_runs(client, settings):
            await client.get_workflow_handle(rid).terminate("door test done")


async def our_runs(client: Client, settings: Settings) -> set[str]:
    query = f"TaskQueue = '{settings.task_queue}' AND ExecutionStatus = 'Running'"
    return {execution.id async for execution in client.list_workflows(query)}


async def untouched(world: World) -> tuple[Any, ...]:
    """What a refused request must leave as it was: each run's execution and history
    (a signal, an accepted update, a reset each add to it) and the memories."""
    described = [
        await world.client.get_workflow_handle(rid).describe()
        for rid in (world.pay.run_id, world.question, world.chat)
    ]
    memories = Stores.open(world.settings).memory.listing(MEMORY_NAMESPACE)
    return (
        [(d.id, d.run_id, d.status, d.history_length) for d in described],
        [m.memory_id for m in memories],
    )


def path_of(world: World, name: str, path: str) -> str:
    params = {"run_id": world.run_for(name), "report_id": "wi-0123456789"}
    try:
        return path.format(**params)
    except KeyError as missing:
        raise AssertionError(f"route {name} has a parameter {missing} none fills here") from None


async def sent(http: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """The response, its body read unless it is a live stream that was let in."""
    async with http.stream(method, path, headers=JSON, **kwargs) as response:
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            await response.aread()
        return response


def refused_in_one_line(response: httpx.Response, caller: Caller) -> str:
    assert response.status_code in (401, 403), (response.status_code, response.text[:300])
    message = str(response.json()["message"])
    assert "\n" not in message
    if caller.user is None:
        assert response.status_code == 401 and message == "sign in first", message
    else:
        assert response.status_code == 403 and message.startswith(f"{caller.user} "), message
    return message


def test_every_route_has_a_declared_role() -> None:
    names = [route.name for route in ROUTES]
    assert len(names) == len(set(names)), "two routes share a name: DOORS could not tell them"
    for name in names:
        assert name in DOORS, f"route {name} has no declared role (console/roles.py: DOORS)"
    stale = sorted(set(DOORS) - set(names))
    assert not stale, f"DOORS declares routes the app does not have: {stale}"
    assert set(ACTING_FORMS) == set(POSTS), "each POST needs a form that would act, here"


def test_no_door_that_acts_opens_to_a_viewer() -> None:
    """A viewer reads: every POST but signing in and out needs more than being signed in
    (the table above follows DOORS; this is what DOORS may never say)."""
    for name in POSTS:
        if name not in ("login", "logout"):
            assert DOORS[name].role not in (Role.ANYONE, Role.VIEWER), name


def test_every_role_is_tried_held_and_not() -> None:
    settings = with_roles(Settings())
    held = [roles_held(settings, name) for name, _ in SIGNED_IN.values()] + [
        roles_held(settings, None)
    ]
    for role in Role:
        assert any(role in h for h in held), f"no one here holds {role}"
        if role is not Role.ANYONE:
            assert any(role not in h for h in held), f"everyone here holds {role}"


async def test_a_route_missing_from_the_declaration_is_refused_to_everyone() -> None:
    app = create_app(Settings())

    @app.get("/undeclared")
    async def undeclared() -> dict[str, bool]:
        return {"reached": True}

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as http:
        response = await http.get("/undeclared", headers=JSON)
    assert response.status_code == 403
    assert response.json()["message"] == (
        "route undeclared has no declared role (console/roles.py: DOORS)"
    )


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize(("name", "method", "path"), DOORWAYS)
async def test_each_door_opens_to_its_role_and_to_no_one_else(
    world: World, name: str, method: str, path: str, persona: str
) -> None:
    caller = world.callers[persona]
    http = caller.client()
    door = DOORS[name]
    may = door.role in roles_held(world.settings, caller.user)
    where = path_of(world, name, path)
    before = await untouched(world)
    if method == "GET":
        response = await sent(http, method, where)
    elif may:
        # Past the door, a field given twice stops the form before anything is read.
        probe = {"csrf": caller.csrf, "probe": ["one", "two"]}
        response = await sent(http, method, where, data=probe)
    else:
        form = {"csrf": caller.csrf, **ACTING_FORMS[name](world)}
        response = await sent(http, method, where, data=form)
    if may:
        assert response.status_code not in (401, 403), (response.status_code, response.text[:300])
        assert response.status_code < 500, (response.status_code, response.text[:300])
    else:
        refused_in_one_line(response, caller)
    assert await untouched(world) == before, f"{method} {where} by {persona} changed something"


@pytest.mark.parametrize("token", ["missing", "wrong"])
@pytest.mark.parametrize("name", POSTS)
async def test_every_post_refuses_a_missing_or_wrong_csrf_token(
    world: World, name: str, token: str
) -> None:
    """By someone who holds every role (nobody yet, for signing in), with a form that
    would act: the token alone stands in the way."""
    [path] = [p for n, m, p in DOORWAYS if n == name and m == "POST"]
    caller = world.callers["no session" if name == "login" else "every role"]
    form = ACTING_FORMS[name](world)
    if token == "wrong":
        form["csrf"] = world.callers["operator"].csrf
    before = await untouched(world)
    http = caller.client()
    response = await sent(http, "POST", path_of(world, name, path), data=form)
    assert response.status_code == 403, (response.status_code, response.text[:300])
    message = response.json()["message"]
    assert message == "the form is stale or forged (CSRF token): reload and retry"
    assert await untouched(world) == before
    home = await sent(http, "GET", "/")
    assert home.status_code == (401 if caller.user is None else 200), "the session changed"


async def test_no_refused_fork_started_a_run(world: World) -> None:
    """A fork starts another run and leaves its parent as it was: the runs on the queue
    are the table's own and, once it shows there, the one fork the operator made now."""
    operator = world.callers["operator"]
    form = {"csrf": operator.csrf, **ACTING_FORMS["fork"](world)}
    forked = await sent(operator.http, "POST", f"/runs/{world.pay.run_id}/fork", data=form)
    assert forked.status_code == 200, forked.text[:300]
    fork = forked.json()["location"].removeprefix("/runs/")

    async def listed() -> set[str]:
        found = await our_runs(world.client, world.settings)
        return found if fork in found else set()

    found = await eventually(listed)
    assert found == {world.pay.run_id, world.question, world.chat, fork}
