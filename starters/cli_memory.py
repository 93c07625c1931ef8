"""agentctl memory: what agents remember across runs, as people see and delete it."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from durable_agents.control import memory
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import load_settings
from durable_agents.starters.errors import run_async
from durable_agents.starters.terminal import SafeConsole, shown

console = SafeConsole()
memory_app = typer.Typer(
    help="What agents remember across runs: list, show, forget (by namespace).",
    no_args_is_help=True,
)
NamespaceArgument = Annotated[str, typer.Argument(help="e.g. customer/jane")]


@memory_app.command("list")
@run_async
async def list_memories(
    namespace: Annotated[
        str | None, typer.Argument(help="A namespace; none: every namespace, with counts.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """A namespace's memories, newest first, with the run and step that wrote each."""
    settings = load_settings()
    if namespace is None:
        counts = memory.namespaces(settings)
        if as_json:
            typer.echo(json.dumps(counts))
            return
        for name, count in counts.items():
            console.print(f"{shown(name)}  {count}")
        if not counts:
            console.print("no memories")
        return
    found = memory.listing(settings, namespace)
    if as_json:
        typer.echo(json.dumps([vars(m) for m in found]))
        return
    table = Table(title=f"memories of {namespace}")
    for column in ("id", "when", "text", "written by (run, step)"):
        table.add_column(column)
    for m in found:
        table.add_row(m.memory_id, m.created_at[:19], shown(m.text), f"{m.run_id}, step {m.step}")
    console.print(table)


@memory_app.command("show")
@run_async
async def show_memory(namespace: NamespaceArgument, memory_id: str) -> None:
    """One memory whole: its text, its fields, who wrote it."""
    found = memory.one(load_settings(), namespace, memory_id)
    typer.echo(json.dumps(vars(found), indent=2))


@memory_app.command("forget")
@run_async
async def forget_memories(
    namespace: NamespaceArgument,
    memory_ids: Annotated[
        list[str] | None, typer.Argument(help="These memories only; none: the whole namespace.")
    ] = None,
) -> None:
    """Forget a namespace's memories, saying what went. The whole namespace: every copy
    kept outside Temporal goes too (the closed runs' stored transcripts and live logs,
    the what-if reports naming them); the named memories only: runs keep their copies."""
    settings = load_settings()
    if memory_ids:
        gone = memory.forget(settings, namespace, memory_ids)
        console.print(
            f"forgot {len(gone)} memories of {shown(namespace)}: {', '.join(gone) or 'nothing'}"
            " (runs that recalled them keep their copies until pruned)"
        )
        return
    report = await memory.forget_subject(await connect(settings), settings, namespace)
    console.print(report.said(namespace), soft_wrap=True, markup=False)


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")
