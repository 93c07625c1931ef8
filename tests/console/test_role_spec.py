"""The console's rule of who may do what, written out here by hand (docs/cli.md's table of
roles, docs/console.md): test_route_roles.py tries every door as console/roles.py
declares it, so a declaration loosened there would loosen that test too. Here the
declaration (DOORS) and who holds which role (roles_held) must equal this literal
specification: a door opened to a lesser role, or a role given to one who should not
hold it, fails. No Temporal: the declaration and the settings alone."""

from __future__ import annotations

import pytest
from starlette.routing import Route

from durable_agents.console.app import create_app
from durable_agents.console.roles import DOORS, Role, roles_held
from durable_agents.runtime.settings import Settings

ANYONE, VIEWER, APPROVER = Role.ANYONE, Role.VIEWER, Role.APPROVER
OPERATOR, MEMORY_ADMIN = Role.OPERATOR, Role.MEMORY_ADMIN

# Each route of the console by its name, and the role it must need.
ROUTE_NEEDS: dict[str, Role] = {
    # no sign-in: signing in and out, the health check
    "health": ANYONE,
    "login_page": ANYONE,
    "login": ANYONE,
    "logout": ANYONE,
    # a viewer reads runs, the inbox and what-if reports
    "inbox": VIEWER,
    "runs_page": VIEWER,
    "run_page": VIEWER,
    "run_panel": VIEWER,
    "run_events": VIEWER,
    "whatif_reports": VIEWER,
    "whatif_report": VIEWER,
    # an approver decides, answers, raises a budget and talks to agents (as each run's
    # policy lets them: the run checks that)
    "decide": APPROVER,
    "answer": APPROVER,
    "budget": APPROVER,
    "send_message": APPROVER,
    # an operator also changes the run itself
    "pause": OPERATOR,
    "resume": OPERATOR,
    "cancel": OPERATOR,
    "edit": OPERATOR,
    "fork": OPERATOR,
    "rewind": OPERATOR,
    # a memory admin sees and forgets memories
    "memory_page": MEMORY_ADMIN,
    "forget": MEMORY_ADMIN,
}

# Who is listed where.
LISTS: dict[str, list[str]] = {
    "console_viewers": ["vera", "victor", "mia", "walt"],
    "console_operators": ["victor", "otto", "eve", "walt"],
    "console_memory_admins": ["mia", "max", "eve", "walt"],
}
# Each kind of user (None: nobody signed in) and exactly the roles they hold. A viewer
# only is never an approver nor an operator, whatever else lists them; a memory admin is
# no operator.
HOLDS: dict[str, tuple[str | None, set[Role]]] = {
    "nobody signed in": (None, {ANYONE}),
    "viewer": ("vera", {ANYONE, VIEWER}),
    "viewer listed as operator": ("victor", {ANYONE, VIEWER}),
    "approver (listed nowhere)": ("april", {ANYONE, VIEWER, APPROVER}),
    "operator": ("otto", {ANYONE, VIEWER, APPROVER, OPERATOR}),
    "memory admin": ("max", {ANYONE, VIEWER, APPROVER, MEMORY_ADMIN}),
    "memory admin, a viewer": ("mia", {ANYONE, VIEWER, MEMORY_ADMIN}),
    "operator and memory admin": ("eve", {ANYONE, VIEWER, APPROVER, OPERATOR, MEMORY_ADMIN}),
    "viewer listed everywhere": ("walt", {ANYONE, VIEWER, MEMORY_ADMIN}),
}


def test_the_specification_names_every_route_of_the_app() -> None:
    routes = {route.name for route in create_app(Settings()).routes if isinstance(route, Route)}
    assert routes == set(ROUTE_NEEDS), (
        f"routes without a role written here: {sorted(routes - set(ROUTE_NEEDS))}; "
        f"written here but gone: {sorted(set(ROUTE_NEEDS) - routes)}"
    )


def test_each_route_is_declared_with_the_role_it_must_need() -> None:
    declared = {name: door.role for name, door in DOORS.items()}
    wrong = {
        name: f"declared {declared.get(name)}, must need {needed}"
        for name, needed in ROUTE_NEEDS.items()
        if declared.get(name) != needed
    }
    assert not wrong, f"console/roles.py DOORS differs from the rule: {wrong}"
    assert set(declared) == set(ROUTE_NEEDS), sorted(set(declared) ^ set(ROUTE_NEEDS))


@pytest.mark.parametrize("kind", HOLDS)
def test_each_kind_of_user_holds_exactly_their_roles(kind: str) -> None:
    user, roles = HOLDS[kind]
    settings = Settings().model_copy(update=LISTS)
    held = roles_held(settings, user)
    assert held == roles, (
        f"{kind} ({user}) holds {names(held)}: "
        f"extra {names(held - roles)}, missing {names(roles - held)}"
    )


def names(roles: set[Role]) -> list[str]:
    return sorted(role.value for role in roles)
