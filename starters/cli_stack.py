"""agentctl up, down, stack, worker: the local stack."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from durable_agents.control import pruning, release
from durable_agents.control.runs import RunError
from durable_agents.infra import stack
from durable_agents.infra.temporal_setup import hours, set_up_namespace
from durable_agents.runtime import versioning
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import load_settings
from durable_agents.starters.errors import run_async
from durable_agents.starters.terminal import SafeConsole, shown

console = SafeConsole()


def say(line: str) -> None:
    """A line about the stack, printed as it is: a path, a namespace or a part's own words
    may hold brackets, which the terminal's markup would take for styles and drop."""
    console.print(shown(line))


@run_async
async def up() -> None:
    """Start the Temporal dev server, the offline model and a worker in the background."""
    settings = load_settings()
    await stack.up(settings, say=say)
    await release.adopt_local_build(await connect(settings), settings, say)
    say(f"Temporal Web UI: {settings.web_ui_url()}")
    say(f"Console: {settings.console_url} (add a user first: agentctl users add NAME)")


@run_async
async def down() -> None:
    """Stop the local stack. Runs are kept: `up` brings them back."""
    stack.down(load_settings(), say=say)


def show_stack() -> None:
    """Say what runs where."""
    settings = load_settings()
    table = Table(title=shown(f"local stack (data dir {settings.data_dir.resolve()})"))
    for column in ("part", "state", "pid", "where", "log"):
        table.add_column(column)
    for part in stack.status(settings):
        state = "[green]running[/]" if part.running else "[red]stopped[/]"
        table.add_row(part.name, state, str(part.pid or ""), shown(part.where), shown(part.log))
    console.print(table)


@run_async
async def setup() -> None:
    """Prepare a namespace of a real cluster: search attributes, retention, prune schedule."""
    settings = load_settings()
    client = await connect(settings)
    done = await set_up_namespace(client, settings, ours=False)
    retention = (
        f"retention set to {hours(done.retention)} (a namespace it created)"
        if done.retention_set
        else f"retention left at {hours(done.retention)} (the namespace's own; ours would be "
        f"{settings.retention_days:g} days)"
    )
    say(
        f"namespace {done.namespace} at {done.address}: search attributes registered, "
        f"{retention}, prune schedule {settings.prune_schedule_id!r}"
    )
    if settings.worker_versioning:
        current = await versioning.current_build(client, settings.deployment_name)
        say(
            f"worker deployment {settings.deployment_name}: "
            + (
                f"new runs start on build {current}"
                if current
                else "no build yet; the first worker's build will take new runs"
            )
        )


@run_async
async def prune(
    older_than: Annotated[str, typer.Option(help="Age of closed runs to prune: 30d, 12h, 0s.")],
    dry_run: Annotated[bool, typer.Option(help="Say what would go; delete nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Remove our stored data of runs closed longer ago than --older-than (never open runs)."""
    settings = load_settings()
    report = await pruning.prune(await connect(settings), settings, older_than, dry_run)
    if as_json:
        typer.echo(report.model_dump_json())
        return
    if report.refused is not None:
        raise RunError(report.refused)  # a worker with a longer retention than ours
    verb = "would prune" if report.dry_run else "pruned"
    say(
        f"{verb} {len(report.pruned)} runs ({report.rows_deleted} rows); kept "
        f"{report.kept_open} open and {report.kept_recent} recently closed"
    )
    for run_id in report.pruned:
        say(f"  {run_id}")
    if report.memories_deleted:
        say(f"{verb} {report.memories_deleted} memories older than AGENT_MEMORY_RETENTION_DAYS")
    if report.whatif_reports_deleted:
        say(f"{verb} {report.whatif_reports_deleted} what-if reports")


def worker() -> None:
    """Run a worker in the foreground (Ctrl-C stops it cleanly)."""
    from durable_agents.worker.main import (
        main,  # the activities' imports (openai): only for this verb
    )

    main()


def register(app: typer.Typer) -> None:
    app.command()(up)
    app.command()(down)
    app.command("stack")(show_stack)
    app.command()(worker)
    app.command()(setup)
    app.command()(prune)
