"""The console's what-if pages: the reports `agentctl whatif` and the Python client kept,
and one report with each recorded run and its shadow side by side (links to both). Read
where the console reaches the stores; any signed-in user may read them, as runs."""

from __future__ import annotations

import asyncio
import re

from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse

from durable_agents.console.web import PageError, console_of, render, signed_in
from durable_agents.control import whatif
from durable_agents.control.runs import RunError

REPORT_ID = re.compile(r"^wi-[0-9a-f]{10}$")


def register(app: FastAPI) -> None:
    @app.get("/whatif", response_class=HTMLResponse)
    async def whatif_reports(request: Request) -> Response:
        user = signed_in(request)
        settings = console_of(request).settings
        try:
            reports = await asyncio.to_thread(whatif.kept_reports, settings)
        except RunError as err:
            raise PageError(503, str(err)) from None
        return render(request, "whatif.html", {"reports": reports, "report": None, "me": user})

    @app.get("/whatif/{report_id}", response_class=HTMLResponse)
    async def whatif_report(request: Request, report_id: str) -> Response:
        user = signed_in(request)
        settings = console_of(request).settings
        if not REPORT_ID.fullmatch(report_id):
            raise PageError(400, "a what-if report id is wi- and 10 hex digits")
        try:
            report = await asyncio.to_thread(whatif.kept_report, settings, report_id)
        except RunError as err:
            raise PageError(503, str(err)) from None
        if report is None:
            raise PageError(404, f"no what-if report {report_id}")
        context = {
            "reports": [],
            "report": report,
            "me": user,
            "web_ui": settings.web_ui_url,
        }
        return render(request, "whatif.html", context)
