"""The console's memory page: a namespace's memories with the run and step that wrote
each, and forgetting the namespace (a person's right to deletion), by a signed-in user;
what went is said back. Read where the console reaches the stores."""

from __future__ import annotations

import asyncio
import logging
import re

from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import Field

from durable_agents.console.actions import Form, done, parse_form
from durable_agents.console.identity import CSRF_FIELD
from durable_agents.console.web import PageError, console_of, read_form, render, signed_in
from durable_agents.control import memory
from durable_agents.control.agents import local_agents
from durable_agents.control.runs import RunError
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.memory import NAMESPACE_PATTERN, template_pattern

log = logging.getLogger("durable_agents.console.memory")


class ForgetForm(Form):
    namespace: str = Field(pattern=NAMESPACE_PATTERN)


def own_namespaces(settings: Settings) -> list[re.Pattern[str]]:
    """The namespaces this deployment's agents keep memories under (AGENT_MODULES): the
    page shows and forgets no other deployment's, even in a database they share."""
    registry = local_agents(settings.agent_modules)
    return [
        template_pattern(agent.memory.namespace)
        for agent in registry.agents.values()
        if agent.memory is not None
    ]


def not_ours(namespace: str) -> str:
    return f"{namespace} is no namespace of this deployment's agents (AGENT_MODULES)"


def _ours(patterns: list[re.Pattern[str]], namespace: str) -> bool:
    return any(pattern.fullmatch(namespace) for pattern in patterns)


def register(app: FastAPI) -> None:
    @app.get("/memory", response_class=HTMLResponse)
    async def memory_page(request: Request, namespace: str = "") -> Response:
        user = signed_in(request)
        settings = console_of(request).settings
        if namespace and not re.fullmatch(NAMESPACE_PATTERN, namespace):
            raise PageError(400, "a namespace is letters, digits and . _ : / @ -")
        try:
            ours = own_namespaces(settings)
            if namespace and not _ours(ours, namespace):
                raise PageError(404, not_ours(namespace))
            stored = await asyncio.to_thread(memory.namespaces, settings)
            names = [name for name in stored if _ours(ours, name)]
            found = (
                await asyncio.to_thread(memory.listing, settings, namespace) if namespace else []
            )
        except RunError as err:
            raise PageError(503, str(err)) from None
        context = {
            "namespace": namespace,
            "namespaces": names,
            "memories": found,
            "me": user,
            "admins": settings.console_memory_admins,
            "stays": memory.WHAT_STAYS,
        }
        return render(request, "memory.html", context)

    @app.post("/memory/forget")
    async def forget(request: Request) -> Response:
        user = signed_in(request)
        console = console_of(request)
        fields = await read_form(request)
        if not console.identity.csrf_ok(request, fields.get(CSRF_FIELD)):
            raise PageError(403, "the form is stale or forged (CSRF token): reload and retry")
        form = parse_form(ForgetForm, fields)
        try:
            if not _ours(own_namespaces(console.settings), form.namespace):
                raise PageError(404, not_ours(form.namespace))
            report = await memory.forget_subject(console.client, console.settings, form.namespace)
        except RunError as err:
            raise PageError(503, str(err)) from None
        message = f"{user} {report.said(form.namespace)}"
        # Kept in the console's log: who erased what, when (the memories themselves are gone).
        log.warning(
            "%s: memories %s; runs cleared %s",
            message,
            ", ".join(report.memories) or "none",
            ", ".join(report.runs_cleared) or "none",
        )
        return done(request, "", message, f"/memory?namespace={form.namespace}")
