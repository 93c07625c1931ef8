"""agentctl run, list, show, watch, approve, reject: verbs on runs."""

from __future__ import annotations

import asyncio
import json
import tomllib
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from activities.stream import StreamEntry
from control import runs
from control.agents import check_limits, describe, known_agent, local_agents
from control.live import LiveReplies
from control.live import shown as shown_replies
from control.runs import RunError
from control.stored import run_effects
from infra.offline_model.scenarios import Fault, ScenarioError, ScenarioSpec, load
from runtime.client import connect
from runtime.settings import load_settings
from starters.errors import RunIdArgument, fail, run_async
from starters.render import print_state, runs_table, summary_panel
from starters.terminal import SafeConsole, shown
from workflows.agents import BEFORE_AGENTS
from workflows.contracts import RunBudget, RunLimits, RunPolicy, RunRequest
from workflows.records import RunStatus

console = SafeConsole()


def run_label(
    label: str | None,
    steps: int | None,
    reply_bytes: int | None,
    faults: list[str],
    offline: bool = True,
) -> str | None:
    """The run's label from the CLI flags. For the offline model it names the scenario it
    plays (with --steps, --reply-bytes and --fault), checked before anything starts; for a
    real endpoint it is the run's own free label."""
    if label is None:
        if steps is not None or reply_bytes is not None or faults:
            raise ScenarioError("--steps, --reply-bytes and --fault need --label (a scenario)")
        return None
    if not label.strip():
        raise ScenarioError("--label is empty: give a label, or leave the flag out")
    if not offline and steps is None and reply_bytes is None and not faults:
        return label
    scenario = label
    params: dict[str, str] = {}
    if steps is not None or reply_bytes is not None:
        if scenario != "long":
            raise ScenarioError("--steps and --reply-bytes apply to --label long only")
        if steps is not None:
            params["steps"] = str(steps)
        if reply_bytes is not None:
            params["reply_bytes"] = str(reply_bytes)
    spec = ScenarioSpec(name=scenario, params=params, faults=[Fault.parse(f) for f in faults])
    load(spec)  # refuse an unknown scenario or bad parameters before starting anything
    return spec.render()


@run_async
async def run(
    goal: Annotated[str, typer.Argument(help="What the agent should achieve.")],
    run_id: Annotated[str | None, typer.Option("--id", help="Run id (the thread id).")] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            help="The agent to run (`agentctl agents` lists them; default: the only one)."
        ),
    ] = None,
    policy_file: Annotated[
        Path | None,
        typer.Option(
            "--policy", help="The run's policy: a JSON or TOML file (default: the agent's)."
        ),
    ] = None,
    limits_file: Annotated[
        Path | None,
        typer.Option(
            "--limits", help="The run's limits: a JSON or TOML file (default: the agent's)."
        ),
    ] = None,
    budget_file: Annotated[
        Path | None,
        typer.Option(
            "--budget",
            help="What the run and its sub-agents may spend: a JSON or TOML file "
            "(usd, tokens, tool_calls, seconds; default: the agent's).",
        ),
    ] = None,
    label: Annotated[
        str | None,
        typer.Option(
            "--label",
            "--scenario",
            help="The run's label; for the offline model, the scenario it plays "
            "(pay-invoice, long). --scenario is its older name.",
        ),
    ] = None,
    steps: Annotated[int | None, typer.Option(help="long: number of steps.", min=1)] = None,
    reply_bytes: Annotated[int | None, typer.Option(help="long: bytes per reply.", min=0)] = None,
    fault: Annotated[
        list[str] | None, typer.Option(help="Inject a fault: PHASE[.TURN]:KIND[*TIMES].")
    ] = None,
    approve_side_effects: Annotated[
        bool, typer.Option(help="Every side effect needs a human, not only payments.")
    ] = False,
    wait: Annotated[bool, typer.Option(help="Wait for the run to finish.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Start a run (or attach to the running one with that id)."""
    if run_id is not None:
        runs.check_run_id(run_id)
    settings = load_settings()
    spec = run_label(label, steps, reply_bytes, fault or [], settings.uses_offline_model)
    policy = read_model_file(policy_file, RunPolicy, "--policy") if policy_file else None
    limits = read_model_file(limits_file, RunLimits, "--limits") if limits_file else None
    budget = read_model_file(budget_file, RunBudget, "--budget") if budget_file else None
    name = default_agent(agent)
    check_limits(local_agents().agents[name or BEFORE_AGENTS], limits)
    if approve_side_effects:  # on top of the policy the run would have had
        base = policy or local_agents().agents[name or BEFORE_AGENTS].policy or RunPolicy()
        policy = base.model_copy(update={"approve_all_side_effects": True})
    request = RunRequest(
        goal=goal, agent=name, label=spec, policy=policy, limits=limits, budget=budget
    )
    client = await connect(settings)
    started = await runs.start_run(client, settings, request, run_id)
    verb = "attached to running run" if started.attached else "started run"
    if not as_json:
        console.print(f"{verb} {started.run_id}  ({settings.web_ui_url(started.run_id)})")
    if wait:
        if not as_json:
            console.print(f"waiting; approve with: agentctl approve {started.run_id}")
        result = await runs.wait_for_outcome(client, started.run_id)
        if as_json:
            typer.echo(json.dumps(result | {"attached": started.attached}))
        else:
            console.print(summary_panel(await runs.get_summary(client, started.run_id)))
        if result["status"] != RunStatus.COMPLETED.value:
            raise typer.Exit(1)
        return
    if as_json:
        status = await runs.recorded_status(client, started.run_id)
        typer.echo(
            json.dumps({"run_id": started.run_id, "status": status, "attached": started.attached})
        )


@run_async
async def list_runs(
    status: Annotated[RunStatus | None, typer.Option(help="Only runs with this status.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List runs, newest first, found through the search attributes."""
    client = await connect(load_settings())
    listings = await runs.list_runs(client, status)
    if as_json:
        typer.echo(json.dumps([listing.__dict__ for listing in listings]))
    else:
        console.print(runs_table(listings))


@run_async
async def show(
    run_id: RunIdArgument,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show a run's whole state."""
    client = await connect(load_settings())
    state = await runs.get_state(client, run_id)
    if as_json:
        typer.echo(state.model_dump_json(indent=2))
    else:
        print_state(console, state)


@run_async
async def watch(
    run_id: RunIdArgument,
    interval: Annotated[float, typer.Option(help="Seconds between refreshes.", min=0.1)] = 0.5,
) -> None:
    """Follow a run live until it ends (Ctrl-C stops watching, not the run); a reply the
    model streams shows under it as it is written."""
    settings = load_settings()
    client = await connect(settings)
    replies = LiveReplies.reachable(settings)
    summary = await runs.get_summary(client, run_id)
    entries: list[StreamEntry] = []
    pos = await asyncio.to_thread(replies.store.start_point, run_id) if replies else 0
    try:
        with Live(summary_panel(summary), console=console, refresh_per_second=8) as live:
            while not summary.status.is_closed:
                if replies is None:
                    await asyncio.sleep(interval)
                else:
                    entries += await replies.after(run_id, pos, wait=interval)
                    pos = entries[-1].pos if entries else pos
                summary = await runs.get_summary(client, run_id)
                live.update(Group(summary_panel(summary), Text(streaming_now(entries))))
    finally:
        if replies is not None:
            await replies.close()


def streaming_now(entries: list[StreamEntry]) -> str:
    """The latest reply being written (or last written), as a reader shows it."""
    texts = list(shown_replies(entries).values())
    return texts[-1][-2000:] if texts else ""


@run_async
async def effects(
    run_id: RunIdArgument,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the effects a run performed, as our effect ledger recorded them."""
    settings = load_settings()
    found = await run_effects(await connect(settings), settings, run_id)
    if as_json:
        typer.echo(json.dumps(found))
        return
    if not found:
        console.print(f"no effects recorded for {run_id}")
        return
    table = Table(title=f"effects of {run_id} (effect ledger)")
    for column in ("when", "tool", "idempotency key", "result"):
        table.add_column(column)
    for effect in found:
        result = json.dumps(effect["result"], sort_keys=True)
        row = (effect["created_at"], effect["tool"], effect["idempotency_key"], result)
        table.add_row(*(shown(value) for value in row))
    console.print(table)


def default_agent(name: str | None) -> str | None:
    """The agent named, checked; else the only one known; else None, the agent of requests
    that name none (BEFORE_AGENTS), when it is known."""
    registry = local_agents()
    if name is not None:
        return known_agent(name, registry).name
    if len(registry.agents) == 1:
        return next(iter(registry.agents))
    if BEFORE_AGENTS in registry.agents:
        return None
    raise RunError(f"name the agent with --agent ({', '.join(sorted(registry.agents))})")


M = TypeVar("M", bound=BaseModel)


def read_model_file(path: Path, model: type[M], flag: str) -> M:
    """A policy or limits file (JSON, or TOML by its suffix), validated before any start."""
    try:
        text = path.read_text()
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except OSError as err:
        raise RunError(f"{flag} {path}: {err.strerror or err}") from None
    except (ValueError, tomllib.TOMLDecodeError) as err:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise RunError(f"{flag} {path}: not valid {kind}: {err}") from None
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        raise RunError(f"{flag} {path}: {where}: {first['msg']}") from None


def agents(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List the agents of AGENT_MODULES: their tools and the risk each declares."""
    try:
        listed = describe(local_agents())
    except RunError as err:
        raise fail(str(err)) from None
    if as_json:
        typer.echo(json.dumps(listed, indent=2))
        return
    table = Table("agent", "planning", "tool", "risk")
    for entry in listed:
        rows = list(entry["tools"])
        rows += [
            {"name": f"{d['tool']} → agent {d['agent']}", "risk": d["risk"]}
            for d in entry["delegates"]
        ]
        rows += [
            {
                "name": f"MCP {m['name']} ({m['transport']})",
                "risk": "as declared; else needs_approval",
            }
            for m in entry["mcp_servers"]
        ]
        for i, spec in enumerate(rows or [{"name": "-", "risk": "-"}]):
            first = i == 0
            table.add_row(
                entry["name"] if first else "",
                ("yes" if entry["planning"] else "no") if first else "",
                spec["name"],
                spec["risk"],
            )
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command()(agents)
    app.command()(effects)
    app.command()(run)
    app.command("list")(list_runs)
    app.command()(show)
    app.command()(watch)
