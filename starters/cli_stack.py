"""agentctl up, down, stack, worker: the local stack."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from infra import stack
from starters.errors import run_async
from worker.main import main as worker_main
from worker.settings import load_settings

console = Console()


@run_async
async def up() -> None:
    """Start the Temporal dev server, the offline model and a worker in the background."""
    settings = load_settings()
    await stack.up(settings, say=console.print)
    console.print(f"Temporal Web UI: {settings.web_ui_url()}")


@run_async
async def down() -> None:
    """Stop the local stack. Runs are kept: `up` brings them back."""
    stack.down(load_settings(), say=console.print)


def show_stack() -> None:
    """Say what runs where."""
    settings = load_settings()
    table = Table(title=f"local stack (data dir {settings.data_dir.resolve()})")
    for column in ("part", "state", "pid", "where", "log"):
        table.add_column(column)
    for part in stack.status(settings):
        state = "[green]running[/]" if part.running else "[red]stopped[/]"
        table.add_row(part.name, state, str(part.pid or ""), part.where, part.log)
    console.print(table)


def worker() -> None:
    """Run a worker in the foreground (Ctrl-C stops it cleanly)."""
    worker_main()


def register(app: typer.Typer) -> None:
    app.command()(up)
    app.command()(down)
    app.command("stack")(show_stack)
    app.command()(worker)
