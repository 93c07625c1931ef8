"""agentctl demo: bring the stack up, pay an invoice with a human in the loop, finish.

It goes through the same client functions as every other verb. With no terminal to
ask, it approves by itself and says so.
"""

from __future__ import annotations

import asyncio
import getpass
import sys
import time

import typer
from temporalio.client import Client

from durable_agents.control import release, runs
from durable_agents.infra import stack
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import load_settings
from durable_agents.starters.errors import run_async
from durable_agents.starters.render import print_state
from durable_agents.starters.terminal import SafeConsole
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.people_inputs import DecideRequest
from durable_agents.workflows.run_summary import RunSummary

console = SafeConsole()
DEMO_AGENT = "invoice"  # examples/invoice.py
DEMO_GOAL = "Pay invoice INV-1001 from ACME Office Supplies and email them a confirmation."
AUTO_APPROVER = "demo-auto-approver"


@run_async
async def demo(
    give_up_after: float = typer.Option(300.0, help="Give up after this many seconds."),
) -> None:
    """Run the pay-invoice agent end to end on the local stack."""
    settings = load_settings()
    await stack.up(settings, say=console.print)
    await release.adopt_local_build(await connect(settings), settings, console.print)
    client = await connect(settings)
    run_id = f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    request = RunRequest(goal=DEMO_GOAL, agent=DEMO_AGENT, label="pay-invoice")
    await runs.start_run(client, settings, request, run_id)
    console.print(f"[bold]run {run_id}[/]: {DEMO_GOAL}")
    console.print("model: scripted offline model" if settings.uses_offline_model else "")
    async with asyncio.timeout(give_up_after):
        await _follow(client, run_id)
    state = await runs.get_state(client, run_id)
    print_state(console, state)
    console.print(f"\nOpen the run in the Temporal Web UI: [link]{settings.web_ui_url(run_id)}[/]")
    console.print(
        f"or in the console: [link]{settings.console_url}/runs/{run_id}[/] "
        "(`agentctl users add NAME` first)"
    )
    if settings.encryption_on:
        console.print(
            "Payloads and stores are encrypted; the Web UI shows them decrypted through the "
            f"codec server at {settings.codec_url}."
        )
    console.print("The stack keeps running so that link works; `agentctl down` stops it.")
    if state.status.value != "completed":
        raise typer.Exit(1)


async def _follow(client: Client, run_id: str) -> None:
    last = ""
    while True:
        summary = await runs.get_summary(client, run_id)
        if summary.progress != last:
            console.print(f"  {summary.progress}")
            last = summary.progress
        if summary.status.is_closed:
            return
        if summary.pending_approvals:
            await _decide(client, run_id, summary)
        await asyncio.sleep(0.2)


async def _decide(client: Client, run_id: str, summary: RunSummary) -> None:
    pending = summary.pending_approvals[0]
    console.print(
        f"[magenta]approval needed[/] for {pending.tool} {pending.arguments}\n"
        f"  model's reason: {pending.reason}\n  policy: {pending.rule}"
    )
    if sys.stdin.isatty():
        approved = typer.confirm("Approve?", default=True)
        by, comment = getpass.getuser(), "at the demo's prompt"
    else:
        console.print(f"  no terminal to ask: approving as {AUTO_APPROVER}")
        approved, by, comment = True, AUTO_APPROVER, "no terminal to ask"
    request = DecideRequest(request_id=pending.request_id, approve=approved, by=by, comment=comment)
    console.print(f"  {await runs.decide(client, run_id, request)}")
