"""agentctl schedule create|list|pause|unpause|delete|trigger: agents that run on a
schedule (Temporal Schedules; each start is a normal run with its own id)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Annotated

import typer
from rich.table import Table

from durable_agents.control import schedules
from durable_agents.control.agents import checked_request, local_agents
from durable_agents.control.pruning import parse_age
from durable_agents.control.runs import RunError
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import load_settings
from durable_agents.starters.cli_options import Flags, options_from_flags, start_flags
from durable_agents.starters.errors import fail, run_async
from durable_agents.starters.terminal import SafeConsole, shown

console = SafeConsole()
schedule_app = typer.Typer(
    help="Agents on a schedule: each time starts a normal run (Temporal Schedules).",
    no_args_is_help=True,
)
NameArgument = Annotated[str, typer.Argument(help="The schedule's name.")]


def _name(value: str) -> str:
    try:
        return schedules.check_name(value)
    except RunError as err:
        raise fail(str(err)) from None


@schedule_app.command()
@run_async
@start_flags  # every start option: --label, --policy, --limits, --budget, --subject
async def create(
    name: NameArgument,
    goal: Annotated[str, typer.Argument(help="What each run should achieve.")],
    agent: Annotated[str, typer.Option(help="The agent to run (agentctl agents).")],
    cron: Annotated[
        list[str] | None, typer.Option(help="A cron expression, e.g. '0 9 * * MON-FRI' (UTC).")
    ] = None,
    every: Annotated[str | None, typer.Option(help="Or an interval: 30s, 15m, 1h, 1d.")] = None,
    overlap: Annotated[
        schedules.Overlap, typer.Option(help="When a run is still going: skip the new one.")
    ] = "skip",
    *,
    flags: Flags,
) -> None:
    """Create a schedule that starts AGENT on GOAL at each time."""
    _name(name)
    every_delta = timedelta(seconds=parse_age(every)) if every is not None else None
    options = options_from_flags(**flags)
    request = checked_request(local_agents(), agent, goal, options)
    settings = load_settings()
    client = await connect(settings)
    info = await schedules.create(
        client, settings, name, request, cron=cron, every=every_delta, overlap=overlap
    )
    when = ", ".join(info.next_runs) or "none"
    console.print(f"schedule {name}: {agent} every time of {_spec(info)}; next runs: {when}")


@schedule_app.command("list")
@run_async
async def list_schedules(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The schedules that start agent runs."""
    found = await schedules.list_all(await connect(load_settings()))
    if as_json:
        typer.echo(json.dumps([info.as_dict() for info in found], indent=2))
        return
    table = Table("schedule", "agent", "when", "state", "next run", "recent runs", "goal")
    for info in found:
        state = "paused" + (f" ({info.note})" if info.note else "") if info.paused else "active"
        row = (
            info.name,
            info.agent,
            _spec(info),
            state,
            next(iter(info.next_runs), ""),
            "\n".join(info.recent_runs[-3:]),
            info.goal,
        )
        table.add_row(*(shown(value) for value in row))
    console.print(table)


def _spec(info: schedules.ScheduleInfo) -> str:
    return ", ".join([*info.cron, *(f"every {s:g}s" for s in info.every_seconds)])


def _verb(name: str, doc: str):  # type: ignore[no-untyped-def]
    @run_async
    async def verb(
        schedule: NameArgument,
        note: Annotated[str, typer.Option(help="Why (shown in the Web UI).")] = "",
    ) -> None:
        client = await connect(load_settings())
        work = getattr(schedules, name)
        if name in ("pause", "unpause"):
            await work(client, _name(schedule), note)
        else:
            await work(client, _name(schedule))
        done = {"pause": "paused", "unpause": "unpaused", "delete": "deleted"}.get(
            name, "triggered"
        )
        console.print(f"schedule {schedule}: {done}")

    verb.__doc__ = doc
    return verb


schedule_app.command("pause")(_verb("pause", "Stop starting runs until unpaused."))
schedule_app.command("unpause")(_verb("unpause", "Start runs again at the schedule's times."))
schedule_app.command("delete")(_verb("delete", "Delete it; runs it started go on."))
schedule_app.command("trigger")(_verb("trigger", "Start a run now (overlap policy applies)."))


def register(app: typer.Typer) -> None:
    app.add_typer(schedule_app, name="schedule")
