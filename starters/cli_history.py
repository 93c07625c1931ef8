"""agentctl history, fork, rewind, export, replay: time travel through a run."""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from durable_agents.activities.model_client import called_tools
from durable_agents.control import stored, timeline
from durable_agents.control.runs import RunError
from durable_agents.runtime import operator_files
from durable_agents.runtime.client import connect, data_converter
from durable_agents.runtime.encryption import KeyringError
from durable_agents.runtime.settings import Settings, load_settings
from durable_agents.starters.cli_people import own_signer
from durable_agents.starters.errors import RunIdArgument, fail, run_async
from durable_agents.starters.render import print_replays, print_state
from durable_agents.starters.terminal import SafeConsole, shown
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.people_inputs import StatePatch
from durable_agents.workflows.timeline import Moment

console = SafeConsole()
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def outcomes(settings: Settings, store_key: str, moments: list[Moment]) -> dict[int, str]:
    """What each model or tool moment produced, read from the transcript store: a store
    this machine can reach (control/stored.py), else the timeline says why it has none."""
    try:
        messages = stored.read_messages(settings, store_key)
    except (RunError, KeyringError) as err:  # the texts are extra: say why, go on
        typer.echo(f"note: no model and tool texts: {err}", err=True)
        return {}
    found = {}
    for moment in moments:
        if moment.kind not in timeline.ACTIVITY_MOMENTS:
            continue
        seq = moment.next_seq - 1
        if seq >= len(messages):
            continue
        message = messages[seq]
        text = preview(message.get("content") or "", 120)
        calls = called_tools(message)
        found[moment.index] = (f"{text} " if text else "") + (
            f"→ {', '.join(calls)}" if calls else ""
        )
    return found


@run_async
async def history(
    run_id: RunIdArgument,
    step: Annotated[int | None, typer.Option(help="The whole state as of step K.", min=1)] = None,
    diff: Annotated[
        int | None, typer.Option(help="What changed from step K-1 to K.", min=1)
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """A run's timeline, rebuilt by replaying its history through the workflow code."""
    if step is not None and diff is not None:
        raise fail("give --step or --diff, not both")
    settings = load_settings()
    # A step or a diff replays only the runs of the chain that hold it.
    only = {step} if step is not None else {diff - 1, diff} - {0} if diff is not None else None
    # The timeline alone lists every moment, and reads none of their states whole.
    found = await timeline.rebuild(await connect(settings), run_id, only, states=False)
    if step is not None:
        state = found.at(step).state
        if as_json:
            typer.echo(state.model_dump_json(indent=2))
        else:
            print_state(console, state)
        return
    if diff is not None:
        _print_diff(found, diff, as_json)
        return
    key = found.moments[-1].store_key if found.moments else run_id
    said = outcomes(settings, key, found.moments)
    rows = [
        {
            "step": m.index,
            "at": m.at.isoformat(timespec="seconds"),
            "kind": m.kind,
            "detail": m.detail,
            "outcome": said.get(m.index, ""),
        }
        for m in found.moments
    ]
    if as_json:
        typer.echo(json.dumps(rows))
        return
    table = Table(title=f"timeline of {run_id}")
    for column in ("step", "at", "kind", "detail", "outcome"):
        table.add_column(column)
    for row in rows:
        table.add_row(*(shown(row[c]) for c in ("step", "at", "kind", "detail", "outcome")))
    console.print(table)


def _print_diff(found: timeline.Timeline, index: int, as_json: bool) -> None:
    after = found.at(index).state.model_dump(mode="json")
    before: dict[str, Any] = found.at(index - 1).state.model_dump(mode="json") if index > 1 else {}
    changes = timeline.diff(before, after)
    if as_json:
        typer.echo(json.dumps([{"path": p, "old": o, "new": n} for p, o, n in changes]))
        return
    table = Table(title=f"step {index - 1} → {index}: {found.at(index).kind}")
    for column in ("path", "before", "after"):
        table.add_column(column)
    for path, old, new in changes:
        table.add_row(shown(path), shown(json.dumps(old)), shown(json.dumps(new)))
    console.print(table)


@run_async
async def fork(
    run_id: RunIdArgument,
    from_step: Annotated[int, typer.Option(help="The step (moment) to start from.", min=1)],
    edit: Annotated[
        Path | None, typer.Option(help="A JSON patch applied to the fork.", exists=True)
    ] = None,
    new_id: Annotated[str | None, typer.Option("--id", help="The new run's id.")] = None,
    by: Annotated[str | None, typer.Option("--as", help="Who forks (default: you).")] = None,
) -> None:
    """Start a new run from a run's state at a step; the step's phase starts over."""
    settings = load_settings()
    patch = None
    if edit is not None:
        try:
            fields = operator_files.load_json(edit)
        except (OSError, ValueError) as err:
            raise fail(f"{edit}: {err}") from None
        if not isinstance(fields, dict):
            raise fail(f"{edit}: the patch must be a JSON object")
        patch = StatePatch.model_validate({**fields, "by": by or getpass.getuser()})
    signer = own_signer(settings)
    started = await timeline.fork(
        await connect(settings),
        settings,
        run_id,
        from_step,
        patch,
        new_id,
        by=by or getpass.getuser(),
        signer=signer,
    )
    console.print(
        f"forked {run_id} at step {from_step} into {started.run_id} "
        f"({settings.web_ui_url(started.run_id)})"
    )


@run_async
async def rewind(
    run_id: RunIdArgument,
    to_step: Annotated[int, typer.Option(help="The step (moment) to go back to.", min=1)],
    by: Annotated[str | None, typer.Option("--as", help="Who rewinds (default: you).")] = None,
) -> None:
    """Go back to a step in the same run (Temporal's reset); effects are not repeated."""
    settings = load_settings()
    signer = own_signer(settings)
    client = await connect(settings)
    new_run = await timeline.rewind(client, run_id, to_step, by or getpass.getuser(), signer)
    console.print(f"rewound {run_id} to step {to_step}; new execution {new_run}")


@run_async
async def export(
    run_id: RunIdArgument,
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the JSON.")],
) -> None:
    """Write a run's history as JSON (the Web UI's and `temporal workflow show` format)."""
    history = await timeline.fetch_history(await connect(load_settings()), run_id)
    timeline.export_history(history, output)
    console.print(f"wrote {len(history.events)} events to {output}")


@run_async
async def replay(files: Annotated[list[Path], typer.Argument(help="History JSON files.")]) -> None:
    """Replay histories against the current workflow code; report any nondeterminism."""
    results = await timeline.replay_files(files, data_converter(load_settings()))
    if not print_replays(console, results):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    for command in (history, fork, rewind, export, replay):
        app.command()(command)
