"""The console served for tests: a real uvicorn server on a free port, in the test's event
loop (beside the in-process worker), reached over real HTTP."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from temporalio.client import Client

from durable_agents.console import users
from durable_agents.console.app import create_app
from durable_agents.console.serving import serving
from durable_agents.runtime.settings import Settings

PASSWORDS = {"alice": "alice-password", "bob": "bob-password", "cfo": "cfo-password"}
CSRF_INPUT = re.compile(r'(?:name="csrf" value|data-csrf)="([^"]+)"')


@dataclass
class LiveConsole:
    url: str
    settings: Settings

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=30.0, follow_redirects=False)


@asynccontextmanager
async def live_console(settings: Settings, client: Client) -> AsyncIterator[LiveConsole]:
    """The test users decide and answer; alice and bob operate runs too, unless the
    settings name the console's operators themselves."""
    if "console_operators" not in settings.model_fields_set:
        settings = settings.model_copy(update={"console_operators": ["alice", "bob"]})
    for name, password in PASSWORDS.items():
        users.add_user(settings.console_users_path, name, password)
    async with serving(create_app(settings, client)) as url:
        yield LiveConsole(url, settings)


def csrf_of(html: str) -> str:
    found = CSRF_INPUT.search(html)
    assert found, "the page has no CSRF token"
    return found.group(1)


async def signed_in(console: LiveConsole, name: str) -> tuple[httpx.AsyncClient, str]:
    """A browser-like HTTP client signed in as `name`, and its CSRF token."""
    http = console.client()
    page = await http.get("/login")
    response = await http.post(
        "/login", data={"csrf": csrf_of(page.text), "name": name, "password": PASSWORDS[name]}
    )
    assert response.status_code == 303, response.text
    home = await http.get("/")
    assert home.status_code == 200
    return http, csrf_of(home.text)
