"""Who may do what from the console: a viewer reads; an approver (every user who is not
a viewer only) decides, answers and talks to agents as each run's policy lets them; an
operator also edits, pauses, resumes, cancels, forks and rewinds; a memory admin sees and
forgets memories. Checked on every route that acts, before anything is sent."""

from __future__ import annotations

from durable_agents.console.web import PageError
from durable_agents.runtime.settings import Settings


def require_approver(settings: Settings, user: str, what: str) -> None:
    if user in settings.console_viewers:
        raise PageError(403, f"{user} views runs only: they may not {what}")


def require_operator(settings: Settings, user: str, what: str) -> None:
    """A viewer only is never an operator, whatever else lists them."""
    if user in settings.console_viewers or user not in settings.console_operators:
        raise PageError(
            403,
            f"{user} may not {what}: that is for the console's operators (AGENT_CONSOLE_OPERATORS)",
        )


def require_memory_admin(settings: Settings, user: str) -> None:
    if user not in settings.console_memory_admins:
        raise PageError(
            403,
            f"{user} may not see or forget memories: that is for the console's memory "
            "admins (AGENT_CONSOLE_MEMORY_ADMINS)",
        )


def roles_of(settings: Settings, user: str | None) -> dict[str, bool]:
    """What a page may offer this user (the routes check again)."""
    if user is None:
        return {"approver": False, "operator": False, "memory_admin": False}
    return {
        "approver": user not in settings.console_viewers,
        "operator": user in settings.console_operators and user not in settings.console_viewers,
        "memory_admin": user in settings.console_memory_admins,
    }
