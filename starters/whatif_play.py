"""The work of `agentctl whatif` (starters/cli_whatif.py is the verb, control/whatif.py
the what-if): imported only when the verb runs, since what the shadows need (the model
client among it) is most of what agentctl would otherwise load at every start."""

from __future__ import annotations

import importlib
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from durable_agents.control import whatif, whatif_record
from durable_agents.control.runs import RunError, check_run_id
from durable_agents.control.whatif import Variant, WhatIfOptions
from durable_agents.control.whatif_judge import ModelJudge
from durable_agents.control.whatif_report import Grader, RunComparison, WhatIfReport
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import Settings, load_settings
from durable_agents.starters.errors import fail
from durable_agents.starters.terminal import SafeConsole
from durable_agents.worker.shadow import build_shadow_worker
from durable_agents.workflows.agents import Agent
from durable_agents.workflows.contracts import RunPolicy
from durable_agents.workflows.tools import ToolDefinitionError

console = SafeConsole(highlight=False, soft_wrap=True)
SPAN = re.compile(r"^(\d{1,6})([dhm])$")
UNITS = {"d": "days", "h": "hours", "m": "minutes"}
MAX_SPAN = timedelta(days=3650)


def _span(value: str | None) -> timedelta | None:
    if value is None:
        return None
    found = SPAN.fullmatch(value.strip())
    if found is None:
        raise fail(f"bad --since {value!r}: a number and d, h or m (7d, 24h, 90m)")
    span = timedelta(**{UNITS[found[2]]: int(found[1])})
    if not timedelta(0) < span <= MAX_SPAN:
        raise fail(f"bad --since {value!r}: more than nothing, at most {MAX_SPAN.days} days")
    return span


def _named(spec: str, what: str) -> Any:
    """MODULE:NAME, imported; a clear line when it is not there."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        example = "durable_agents.examples.invoice:invoice_agent"
        raise fail(f"bad {what} {spec!r}: write MODULE:NAME ({example})")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise fail(f"cannot import {module_name!r} for {what} {spec!r}: {err}") from None
    except ToolDefinitionError as err:
        raise fail(str(err)) from None
    if not hasattr(module, name):
        raise fail(f"{module_name!r} has no {name!r} ({what} {spec})")
    return getattr(module, name)


def _variant(
    agent: str | None,
    instructions: str | None,
    instructions_file: Path | None,
    model: str | None,
    policy_file: Path | None,
) -> Variant:
    found_agent = _named(agent, "--agent") if agent else None
    if found_agent is not None and not isinstance(found_agent, Agent):
        raise fail(f"--agent {agent}: that is not an Agent")
    if instructions_file is not None:
        try:
            instructions = instructions_file.read_text()
        except (OSError, UnicodeDecodeError) as err:
            why = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
            raise fail(f"cannot read {instructions_file}: {why or err}") from None
    if instructions is not None and not instructions.strip():
        raise fail("the variant's instructions are empty")
    policy = None
    if policy_file is not None:
        try:
            policy = RunPolicy.model_validate_json(policy_file.read_text())
        except (OSError, UnicodeDecodeError) as err:
            why = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
            raise fail(f"cannot read {policy_file}: {why or err}") from None
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "policy"
            raise fail(f"{policy_file}: {where}: {first['msg']}") from None
    return Variant(agent=found_agent, instructions=instructions, model=model, policy=policy)


def _graders(
    specs: list[str], judge: str | None, unchanged: bool, settings: Settings
) -> list[Grader]:
    graders: list[Grader] = []
    for spec in specs:
        found = _named(spec, "--grader")
        if not callable(found):
            raise fail(f"--grader {spec}: that is not a function")
        graders.append(found)
    if judge is not None:
        graders.append(ModelJudge(judge, settings=settings))
    if unchanged:
        graders.append(no_difference)
    return graders


def no_difference(run: RunComparison) -> str | None:
    """--fail-on-difference: any difference fails the run."""
    return "; ".join(run.differences) or None


async def play(
    run_ids: list[str] | None,
    history: list[Path] | None,
    agent_runs: str | None,
    since: str | None,
    query: str | None,
    limit: int,
    agent: str | None,
    instructions: str | None,
    instructions_file: Path | None,
    model: str | None,
    policy_file: Path | None,
    grader: list[str] | None,
    judge: str | None,
    fail_on_difference: bool,
    read_only: str,
    unmatched: str,
    as_json: bool,
) -> None:
    """Play recorded runs again against a changed agent: no effect is made; what would
    change is shown. Exit 1 when a grader fails."""
    if read_only not in ("recorded", "live"):
        raise fail(f"bad --read-only {read_only!r}: recorded or live")
    if unmatched not in ("approve", "reject", "stop"):
        raise fail(f"bad --unmatched {unmatched!r}: approve, reject or stop")
    if instructions is not None and instructions_file is not None:
        raise fail("give --instructions or --instructions-file, not both")
    settings = load_settings()
    variant = _variant(agent, instructions, instructions_file, model, policy_file)
    graders = _graders(grader or [], judge, fail_on_difference, settings)
    if not (run_ids or history or agent_runs or since or query):
        raise fail("name the runs: run ids, --history FILE, or --agent-runs NAME [--since 7d]")
    for run_id in run_ids or []:
        check_run_id(run_id)
    matching = whatif_record.Matching(agent_runs, _span(since), query, limit)
    client = await connect(settings)

    def say(line: str) -> None:
        if not as_json:
            console.print(escape(line))

    recorded = await whatif_record.recorded_runs(
        client,
        settings,
        run_ids=run_ids or [],
        files=history or [],
        matching=matching,
        skipped=lambda why: typer.echo(why, err=True),
    )
    say(f"playing {len(recorded)} recorded runs again with {variant.describe()}")
    try:
        report = await whatif.what_if(
            client,
            settings,
            recorded,
            variant,
            build_shadow_worker,
            graders=graders,
            options=WhatIfOptions(read_only=read_only, unmatched=unmatched),  # type: ignore[arg-type]
            say=say,
        )
    except ToolDefinitionError as err:
        raise RunError(str(err)) from None
    whatif.keep_report(settings, report)
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        print_report(report, settings)
    if not report.passed:
        for run in report.failing():
            reasons = "; ".join(f"{g.grader}: {g.reason}" for g in run.grades if not g.passed)
            typer.echo(f"FAILED {run.run_id}: {reasons}", err=True)
        raise typer.Exit(1)


def print_report(report: WhatIfReport, settings: Settings) -> None:
    table = Table(title=f"what if: {escape(report.variant)}", title_justify="left")
    for column in ("run", "status", "final answer", "effects", "approvals", "tokens", "graders"):
        table.add_column(column)
    for run in report.runs:
        table.add_row(*_row(run))
    console.print(table)
    totals = report.totals
    console.print(
        f"{totals.runs_with_differences} of {totals.runs} runs differ: "
        f"{totals.effects_added} effects added, {totals.effects_removed} removed, "
        f"{totals.effects_changed} changed; tokens {totals.tokens_then} then, "
        f"{totals.tokens_now} now (${totals.cost_then_usd:.4f} -> ${totals.cost_now_usd:.4f})"
    )
    for run in report.runs:
        for line in run.differences:
            console.print(f"  {run.run_id}: {escape(line)}")
    console.print(f"report {report.id}: {settings.console_url}/whatif/{report.id}")


def _row(run: RunComparison) -> list[str]:
    status = (
        run.now.status
        if run.then.status == run.now.status
        else (f"{run.then.status} -> {run.now.status}")
    )
    answer = "same" if run.then.final_answer == run.now.final_answer else "[yellow]changed[/]"
    counts = {kind: 0 for kind in ("added", "removed", "changed")}
    for change in run.effect_changes:
        counts[change.change] += 1
    effects = (
        "same"
        if not run.effect_changes
        else f"+{counts['added']} -{counts['removed']} ~{counts['changed']}"
    )
    approvals = f"{len(run.then.approvals)} -> {len(run.now.approvals)}"
    tokens = f"{run.then.tokens} -> {run.now.tokens}"
    failed = [g.grader for g in run.grades if not g.passed]
    graders = (
        "[red]" + escape(", ".join(failed)) + "[/]" if failed else ("ok" if run.grades else "")
    )
    return [escape(run.run_id), status, answer, effects, approvals, tokens, graders]
