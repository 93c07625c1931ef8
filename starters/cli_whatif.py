"""agentctl whatif: play recorded runs again against a changed agent, no effect made, and
show what would change; exit 1 when a grader fails, naming each failing run on a line
(control/whatif.py). The work is in starters/whatif_play.py, imported when the verb runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from durable_agents.starters.errors import run_async


def register(app: typer.Typer) -> None:
    app.command(name="whatif")(whatif_command)


@run_async
async def whatif_command(
    run_ids: Annotated[list[str] | None, typer.Argument(help="Recorded runs' ids.")] = None,
    history: Annotated[
        list[Path] | None, typer.Option("--history", help="An exported history file.")
    ] = None,
    agent_runs: Annotated[
        str | None, typer.Option("--agent-runs", help="The closed runs of this agent.")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Closed within this long (7d, 24h, 90m).")
    ] = None,
    query: Annotated[
        str | None, typer.Option(help="A visibility query the runs must match too.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many runs.")] = 100,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Play them with this agent (MODULE:NAME).")
    ] = None,
    instructions: Annotated[
        str | None, typer.Option(help="Override the agent's instructions.")
    ] = None,
    instructions_file: Annotated[
        Path | None, typer.Option(help="Override the instructions from a file.")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Override the agent's model.")] = None,
    policy_file: Annotated[
        Path | None, typer.Option(help="Override the run policy (a JSON file).")
    ] = None,
    grader: Annotated[
        list[str] | None, typer.Option(help="A grader function (MODULE:NAME); repeatable.")
    ] = None,
    judge: Annotated[
        str | None, typer.Option(help="Criteria a model judges each run against.")
    ] = None,
    fail_on_difference: Annotated[bool, typer.Option(help="Any difference fails its run.")] = False,
    read_only: Annotated[
        str, typer.Option(help="Read-only tools: recorded (from the record) or live.")
    ] = "recorded",
    unmatched: Annotated[
        str,
        typer.Option(help="An approval the record lacks: approve, reject or stop."),
    ] = "approve",
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Play recorded runs again against a changed agent: no effect is made; what would
    change is shown. Exit 1 when a grader fails."""
    from durable_agents.starters.whatif_play import (
        play,  # the model client and the shadows: see there
    )

    await play(
        run_ids=run_ids,
        history=history,
        agent_runs=agent_runs,
        since=since,
        query=query,
        limit=limit,
        agent=agent,
        instructions=instructions,
        instructions_file=instructions_file,
        model=model,
        policy_file=policy_file,
        grader=grader,
        judge=judge,
        fail_on_difference=fail_on_difference,
        read_only=read_only,
        unmatched=unmatched,
        as_json=as_json,
    )
