"""agentctl release check|promote|status|move: which build of the workers takes new runs,
gated by replaying real histories on the code installed here (control/release.py)."""

from __future__ import annotations

import getpass
import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from durable_agents.control import release
from durable_agents.control.release import CheckReport, ReleaseRefused, RunCheck
from durable_agents.runtime import versioning
from durable_agents.runtime.client import connect, data_converter
from durable_agents.runtime.settings import load_settings
from durable_agents.starters.errors import RunIdArgument, fail, run_async
from durable_agents.starters.render import print_replays
from durable_agents.starters.terminal import SafeConsole

console = SafeConsole(highlight=False, soft_wrap=True)
release_app = typer.Typer(
    help="Safe deploys: check a build against real histories, promote it, move runs.",
    no_args_is_help=True,
)
AsOption = Annotated[str | None, typer.Option("--as", help="Who acts (default: you).")]
BUILD_ID = re.compile(r"[A-Za-z0-9_.+-]{1,200}")


def _build(value: str) -> str:
    """A build id as AGENT_BUILD_ID allows it, refused in one line before anything connects."""
    if not BUILD_ID.fullmatch(value):
        raise fail(f"bad build id {value!r}: use letters, digits and . _ + - (at most 200)")
    return value


def _line(run: RunCheck, total: int | None = None) -> None:
    mark = "[green]ok[/]      " if run.verdict.ok else "[red]DIVERGES[/]"
    state = "open  " if run.is_open else "closed"
    pinned = f"on {run.build}" if run.build else "unpinned"
    why = "" if run.verdict.ok else f"  at {run.where}: {escape(run.verdict.message)}"
    console.print(f"{mark} {run.run_id}  {state}  {pinned}  {run.agent}{why}")


def _verdict(report: CheckReport) -> None:
    count, total = len(report.diverging), len(report.runs)
    if report.ok:
        console.print(f"all {total} runs replay on build {report.build}")
    else:
        console.print(
            f"[red]{count} of {total} runs would diverge on build {report.build}[/]: put the "
            "change behind workflow.patched (docs/changing-workflows.md)"
        )


@release_app.command()
@run_async
async def check(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="History files or directories; without: the live runs."),
    ] = None,
    per_agent: Annotated[
        int, typer.Option(min=0, max=100, help="Closed runs of each agent to replay.")
    ] = release.CLOSED_PER_AGENT,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Replay open and recent runs (or files) on the code here; exit 1 if any diverge."""
    settings = load_settings()
    if paths:
        outcomes = await release.check_files(paths, data_converter(settings))
        if as_json:
            typer.echo(json.dumps([{**asdict(o), "path": str(o.path)} for o in outcomes]))
        if not (all(o.ok for o in outcomes) if as_json else print_replays(console, outcomes)):
            raise typer.Exit(1)
        return
    client = await connect(settings)
    here = versioning.build_id(settings)
    if not as_json:
        console.print(
            f"replaying the open runs and the latest {per_agent} closed runs of each agent on "
            f"build {here} (the code here)"
        )
    report = await release.check_runs(
        client, settings, per_agent=per_agent, progress=None if as_json else _line
    )
    if as_json:
        typer.echo(json.dumps(_report_json(report), indent=2))
    else:
        _verdict(report)
    if not report.ok:
        raise typer.Exit(1)


def _report_json(report: CheckReport) -> dict[str, object]:
    return {
        "build": report.build,
        "ok": report.ok,
        "runs": [
            {
                "run_id": r.run_id,
                "temporal_run": r.temporal_run,
                "open": r.is_open,
                "build": r.build,
                "agent": r.agent,
                "ok": r.verdict.ok,
                "event_id": r.verdict.event_id,
                "event_type": r.verdict.event_type,
                "message": r.verdict.message,
            }
            for r in report.runs
        ],
    }


@release_app.command()
@run_async
async def promote(
    build: Annotated[str, typer.Argument(help="The build to make current.", callback=_build)],
    force: Annotated[bool, typer.Option(help="Skip the check (runs may diverge).")] = False,
    by: AsOption = None,
) -> None:
    """Make BUILD the one new runs start on, after `release check` passes on its code."""
    settings = load_settings()
    client = await connect(settings)
    try:
        report = await release.promote(
            client,
            settings,
            build,
            force=force,
            by=f"agentctl release promote ({by or getpass.getuser()})",
            progress=_line,
        )
    except ReleaseRefused as refused:
        _verdict(refused.report)
        raise
    if report is not None:
        _verdict(report)
    status = await release.status(client, settings)
    held = sum(b.open_runs for b in status.builds if b.build != build)
    console.print(
        f"build {build} is current{' (forced, unchecked)' if force else ''}: new runs start "
        f"on it; {held} open runs stay on the builds that started them (agentctl release status)"
    )


@release_app.command()
@run_async
async def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The deployment's builds: which takes new runs, the open runs each holds, which can be
    retired (drained: not current and no open run pinned there)."""
    settings = load_settings()
    found = await release.status(await connect(settings), settings)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "deployment": found.deployment,
                    "current": found.current,
                    "unpinned_open_runs": found.unpinned_open_runs,
                    "builds": [{**asdict(b), "retirable": b.retirable} for b in found.builds],
                },
                indent=2,
            )
        )
        return
    console.print(f"deployment {found.deployment}; new runs start on {found.current or 'none'}")
    table = Table("build", "state", "open runs", "retirable", "here")
    for b in found.builds:
        table.add_row(
            b.build,
            b.state,
            str(b.open_runs),
            "yes" if b.retirable else "no",
            "*" if b.here else "",
        )
    console.print(table)
    if found.unpinned_open_runs:
        console.print(
            f"{found.unpinned_open_runs} open runs are pinned to no build (started before "
            "versioning): they replay on the current build"
        )


@release_app.command()
@run_async
async def move(
    run_id: RunIdArgument,
    to: Annotated[str, typer.Option("--to", help="The build to move the run to.", callback=_build)],
    by: AsOption = None,
) -> None:
    """Move an open run to build TO, only if its history replays on TO's code (here)."""
    settings = load_settings()
    moved = await release.move(
        await connect(settings),
        settings,
        run_id,
        to,
        by=f"agentctl release move ({by or getpass.getuser()})",
    )
    console.print(
        f"run {run_id} moved from {moved.build or 'no build'} to {to}: its history replays there"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(release_app, name="release")
