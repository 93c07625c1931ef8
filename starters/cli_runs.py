"""agentctl run, list, show, watch, approve, reject: verbs on runs."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text
from temporalio.client import Client

from durable_agents.activities.stream import StreamEntry
from durable_agents.control import callers, runs
from durable_agents.control.agents import checked_request, describe, known_agent, local_agents
from durable_agents.control.live import LiveReplies
from durable_agents.control.live import shown as shown_replies
from durable_agents.control.runs import RunError
from durable_agents.control.stored import run_effects
from durable_agents.infra.offline_model.scenarios import Fault, ScenarioError, ScenarioSpec, load
from durable_agents.runtime.client import connect
from durable_agents.runtime.connection import is_loopback
from durable_agents.runtime.settings import Settings, load_settings
from durable_agents.starters.cli_options import Flags, options_from_flags, start_flags
from durable_agents.starters.errors import RunIdArgument, fail, run_async
from durable_agents.starters.render import print_state, runs_table, summary_panel
from durable_agents.starters.terminal import SafeConsole, shown
from durable_agents.workflows.contracts import RunPolicy
from durable_agents.workflows.records import RunStatus

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


def web_ui_link(client: Client, settings: Settings, run_id: str) -> str:
    """The run's Web UI address, in brackets, or nothing where it is not known: our
    AGENT_TEMPORAL_UI_PORT is the Web UI of the server our settings name, on this machine
    (the local stack's dev server) or where the setting is given. A server reached another
    way (TEMPORAL_ADDRESS, a profile) has its Web UI wherever its team put it: no link
    rather than one to our default port."""
    named = client.service_client.config.target_host == settings.temporal_address
    placed = is_loopback(settings.temporal_host) or "temporal_ui_port" in settings.model_fields_set
    if named and client.namespace == settings.namespace and placed:
        return f"  ({settings.web_ui_url(run_id)})"
    return ""


@run_async
@start_flags  # --policy, --limits, --budget, --subject: every start option but the label
async def run(
    goal: Annotated[str, typer.Argument(help="What the agent should achieve.")],
    run_id: Annotated[str | None, typer.Option("--id", help="Run id (the thread id).")] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            help="The agent to run (`agentctl agents` lists them; default: the only one)."
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
    *,
    flags: Flags,
) -> None:
    """Start a run (or attach to the running one with that id)."""
    if run_id is not None:
        runs.check_run_id(run_id)
    settings = load_settings()
    spec = run_label(label, steps, reply_bytes, fault or [], settings.uses_offline_model)
    options = options_from_flags(**flags, label=spec)
    registry = local_agents()
    found = known_agent(default_agent(agent), registry)
    if approve_side_effects:  # on top of the policy the run would have had
        base = options.policy or found.policy or RunPolicy()
        tighter = base.model_copy(update={"approve_all_side_effects": True})
        options = options.model_copy(update={"policy": tighter})
    request = checked_request(registry, found, goal, options)
    client = await connect(settings)
    started = await runs.start_run(client, settings, request, run_id)
    verb = "attached to running run" if started.attached else "started run"
    if not as_json:
        console.print(f"{verb} {started.run_id}{web_ui_link(client, settings, started.run_id)}")
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
    """Show a run's whole state; given your own workflow's id, the agent runs it started
    (run_agent), each whole."""
    client = await connect(load_settings())
    found, states = await callers.states(client, run_id)
    if found.caller is None:
        if as_json:
            typer.echo(states[0].model_dump_json(indent=2))
        else:
            print_state(console, states[0])
            print_held_up(await runs.store_wait(client, states[0].run_id))
        return
    if as_json:
        dumped = [state.model_dump(mode="json") for state in states]
        typer.echo(json.dumps({"caller": found.caller, "agent_runs": dumped}, indent=2))
        return
    console.print(shown(f"{found.caller} is not an agent run; the agent runs it started:"))
    for run in found.agent_runs:
        console.print(shown(f"  {run.run_id}  {run.status or run.temporal_status}"), soft_wrap=True)
    for state in states:
        console.rule(shown(state.run_id))
        print_state(console, state)
        print_held_up(await runs.store_wait(client, state.run_id))


def print_held_up(wait: str) -> None:
    """What holds the run up that only an operator can move (docs/operations.md,
    "Replicas with stores of their own"), when something does."""
    if wait:
        console.print(shown(wait), style="yellow", soft_wrap=True)


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


def default_agent(name: str | None) -> str:
    """The agent named; else the only one known; else RunError naming them (a worker with
    several agents never runs one the caller did not choose)."""
    registry = local_agents()
    if name is not None:
        return known_agent(name, registry).name
    if len(registry.agents) == 1:
        return next(iter(registry.agents))
    raise RunError(f"name the agent with --agent ({', '.join(sorted(registry.agents))})")


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
