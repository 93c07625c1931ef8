"""Who may do what from the console: a viewer reads; an approver (every user who is not
a viewer only) decides, answers and talks to agents as each run's policy lets them; an
operator also edits, pauses, resumes, cancels, forks and rewinds; a memory admin sees and
forgets memories.

Each route's role is declared once, in DOORS, and checked at its door (`at_the_door` in
console/web.py, a dependency of every route) before the request is read: a route missing
from DOORS is refused to everyone. tests/console/test_route_roles.py tries every route with
every role. This module is the rule alone, a function of the settings: it imports nothing
of the console's web machinery (which asks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from durable_agents.runtime.settings import Settings


class Role(StrEnum):
    ANYONE = "anyone"  # no sign-in needed: signing in and out, the health check
    VIEWER = "viewer"  # every signed-in user: reads runs
    APPROVER = "approver"
    OPERATOR = "operator"
    MEMORY_ADMIN = "memory_admin"


@dataclass(frozen=True)
class Door:
    """The role a route needs, and what it does as a refusal says it."""

    role: Role
    what: str = ""


_MEMORIES = "see or forget memories"
# Every route of the console by its name, and who may use it.
DOORS: dict[str, Door] = {
    "health": Door(Role.ANYONE),
    "login_page": Door(Role.ANYONE),
    "login": Door(Role.ANYONE),
    "logout": Door(Role.ANYONE),
    "inbox": Door(Role.VIEWER),
    "runs_page": Door(Role.VIEWER),
    "run_page": Door(Role.VIEWER),
    "run_panel": Door(Role.VIEWER),
    "run_events": Door(Role.VIEWER),
    "whatif_reports": Door(Role.VIEWER),
    "whatif_report": Door(Role.VIEWER),
    "decide": Door(Role.APPROVER, "decide"),
    "answer": Door(Role.APPROVER, "answer questions"),
    "budget": Door(Role.APPROVER, "change a budget"),
    "send_message": Door(Role.APPROVER, "talk to agents"),
    "pause": Door(Role.OPERATOR, "pause runs"),
    "resume": Door(Role.OPERATOR, "resume runs"),
    "cancel": Door(Role.OPERATOR, "cancel runs"),
    "edit": Door(Role.OPERATOR, "edit runs"),
    "fork": Door(Role.OPERATOR, "fork runs"),
    "rewind": Door(Role.OPERATOR, "rewind runs"),
    "memory_page": Door(Role.MEMORY_ADMIN, _MEMORIES),
    "forget": Door(Role.MEMORY_ADMIN, _MEMORIES),
}


def roles_held(settings: Settings, user: str | None) -> set[Role]:
    """The roles of a user (None: nobody signed in). A viewer only is never an approver
    nor an operator, whatever else lists them."""
    if user is None:
        return {Role.ANYONE}
    held = {Role.ANYONE, Role.VIEWER}
    if user not in settings.console_viewers:
        held.add(Role.APPROVER)
        if user in settings.console_operators:
            held.add(Role.OPERATOR)
    if user in settings.console_memory_admins:
        held.add(Role.MEMORY_ADMIN)
    return held


# What a refusal says, by the role the door needs (a signed-in user is always a viewer).
REFUSALS: dict[Role, str] = {
    Role.APPROVER: "{user} views runs only: they may not {what}",
    Role.OPERATOR: (
        "{user} may not {what}: that is for the console's operators (AGENT_CONSOLE_OPERATORS)"
    ),
    Role.MEMORY_ADMIN: (
        "{user} may not {what}: that is for the console's memory admins "
        "(AGENT_CONSOLE_MEMORY_ADMINS)"
    ),
}


def refusal(settings: Settings, user: str, door: Door) -> str | None:
    """Why the user may not pass this door, in one line; None: they may."""
    if door.role in roles_held(settings, user):
        return None
    return REFUSALS[door.role].format(user=user, what=door.what)


def roles_of(settings: Settings, user: str | None) -> dict[str, bool]:
    """What a page may offer this user (the routes check again)."""
    held = roles_held(settings, user)
    return {role.value: role in held for role in (Role.APPROVER, Role.OPERATOR, Role.MEMORY_ADMIN)}
