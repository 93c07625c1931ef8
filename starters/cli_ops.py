"""agentctl doctor and keys: diagnosis and encryption keys."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from durable_agents.control.doctor import diagnose
from durable_agents.runtime.encryption import new_key
from durable_agents.runtime.settings import load_settings
from durable_agents.starters.errors import run_async
from durable_agents.starters.terminal import SafeConsole

console = SafeConsole()
keys_app = typer.Typer(help="Encryption keys for payloads and stores.", no_args_is_help=True)


@run_async
async def doctor(
    quiet: Annotated[bool, typer.Option(help="Print only what is wrong (for probes).")] = False,
    only: Annotated[
        str | None, typer.Option(help="Check only these parts, e.g. temporal,stores.")
    ] = None,
) -> None:
    """Check Temporal, the worker, the model endpoint, the stores and the codec."""
    parts = {p.strip() for p in only.split(",") if p.strip()} if only else None
    settings = load_settings()
    try:
        findings = await diagnose(settings, parts)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--only") from None
    for finding in findings:
        if finding.ok and quiet:
            continue
        # Only the mark is markup: what a finding says may hold brackets ([postgres]).
        mark = "[green]ok[/]  " if finding.ok else "[red]FAIL[/]"
        console.print(f"{mark} {finding.part:<10} {escape(finding.says)}", highlight=False)
        if finding.fix:
            console.print(f"     {'':<10} fix: {escape(finding.fix)}", highlight=False)
    if not all(finding.ok for finding in findings):
        raise typer.Exit(1)


@keys_app.command("new")
def new(
    key_id: Annotated[str, typer.Argument(help="A name for the key, e.g. 2026-12.")],
    file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            help="Write the keys file (owner-only; refused if it exists): what "
            "AGENT_ENCRYPTION_KEYS_FILE names for every part of the deployment.",
        ),
    ] = None,
) -> None:
    """Print a fresh AES-256 key entry, or write it as a new keys file. To rotate, put the
    new entry first in the keys (the old ones stay, to read what they sealed)."""
    if not key_id or any(c in key_id for c in "=,: \n"):
        raise typer.BadParameter("a key id has no '=', ',', ':' or spaces")
    entry = f"{key_id}={new_key()}"
    if file is None:
        typer.echo(entry)
        return
    try:
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise typer.BadParameter(
            f"{file} exists: to rotate, add the new entry first in it", param_hint="--file"
        ) from None
    except OSError as err:
        raise typer.BadParameter(f"{file}: {err.strerror}", param_hint="--file") from None
    with os.fdopen(fd, "w") as keys:
        keys.write(entry + "\n")
    typer.echo(f"keys: made {file} (key {key_id!r}); set AGENT_ENCRYPTION_KEYS_FILE={file}")


def register(app: typer.Typer) -> None:
    app.command()(doctor)
    app.add_typer(keys_app, name="keys")
