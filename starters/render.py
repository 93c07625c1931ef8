"""How runs look on a terminal (rich), kept apart from what the commands do."""

from __future__ import annotations

import json

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from durable_agents.control.runs import InboxItem, RunListing
from durable_agents.control.timeline import ReplayOutcome
from durable_agents.starters.terminal import shown
from durable_agents.workflows.records import RunStatus, StepStatus
from durable_agents.workflows.run_summary import RunSummary
from durable_agents.workflows.state import RunState

STATUS_STYLE = {
    RunStatus.COMPLETED: "green",
    RunStatus.FAILED: "red",
    RunStatus.CANCELLED: "yellow",
    RunStatus.AWAITING_APPROVAL: "bold magenta",
    RunStatus.AWAITING_INPUT: "bold magenta",
}
STEP_MARK = {
    StepStatus.DONE: "[green]✔[/]",
    StepStatus.RUNNING: "[cyan]▶[/]",
    StepStatus.PENDING: "·",
}


def status_text(status: RunStatus) -> Text:
    return Text(status.value, style=STATUS_STYLE.get(status, "cyan"))


def summary_panel(summary: RunSummary) -> Panel:
    lines = [
        Text.assemble("status  ", status_text(summary.status), f"   {summary.progress}"),
        Text(f"goal    {summary.goal}"),
        Text(
            f"usage   {summary.usage.model_calls} model calls "
            f"({summary.usage.memoized_calls} memoized), "
            f"{summary.usage.input_tokens}+{summary.usage.output_tokens} tokens, "
            f"${summary.usage.cost_usd:.4f}"
        ),
    ]
    if summary.spent is not None and (summary.delegations or summary.budget is not None):
        lines.append(Text(f"spent   {spend_line(summary)} (with its sub-agents)"))
    if summary.budget is not None:
        lines.append(Text(f"budget  {budget_line(summary)}"))
    if summary.parent is not None:
        lines.append(Text(f"forked  from {summary.parent.run_id} at step {summary.parent.moment}"))
    if summary.delegated_by is not None:
        origin = summary.delegated_by
        lines.append(Text(f"sub-agent of {origin.run_id} (step {origin.step}, {origin.agent})"))
    for request in summary.pending_approvals:
        lines.append(
            Text(
                f"waiting approval {request.request_id}: {request.tool} {request.arguments}",
                style="magenta",
            )
        )
    if summary.final_answer:
        lines.append(Text(f"answer  {summary.final_answer}", style="green"))
    if summary.output is not None:
        typed = json.dumps(summary.output, ensure_ascii=False, sort_keys=True)
        lines.append(Text(f"output  {typed}", style="green"))
    for error in summary.errors:
        lines.append(Text(f"error   {error}", style="red"))
    return Panel(Group(*lines), title=f"run {summary.run_id}", expand=False)


def spend_line(summary: RunSummary) -> str:
    spent = summary.spent
    if spent is None:
        return ""
    return f"${spent.usd:.4f}, {spent.tokens} tokens, {spent.tool_calls} tool calls"


def budget_line(summary: RunSummary) -> str:
    budget = summary.budget
    if budget is None:
        return "none"
    parts = []
    if budget.usd is not None:
        parts.append(f"${budget.usd:.4f}")
    if budget.tokens is not None:
        parts.append(f"{budget.tokens} tokens")
    if budget.tool_calls is not None:
        parts.append(f"{budget.tool_calls} tool calls")
    if budget.seconds is not None:
        parts.append(f"{budget.seconds:g} s")
    return ", ".join(parts) or "none"


def delegations_table(state: RunState) -> Table:
    table = Table(title="sub-agents (child runs)")
    for column in ("step", "agent", "run id", "status", "spent", "task"):
        table.add_column(column)
    for d in state.delegations:
        spent = f"${d.spent.usd:.4f}, {d.spent.tokens} tok, {d.spent.tool_calls} calls"
        reused = " (reused by this fork)" if d.inherited else ""
        table.add_row(
            str(d.step), shown(d.agent), d.child_id, d.status + reused, spent, shown(d.task)
        )
    return table


def plan_table(state: RunState) -> Table:
    table = Table(title="plan", show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("")
    table.add_column("step")
    table.add_column("result")
    for step in state.plan:
        table.add_row(
            str(step.index), STEP_MARK[step.status], shown(step.title), shown(step.result or "")
        )
    return table


def print_state(console: Console, state: RunState) -> None:
    console.print(summary_panel(RunSummary.of(state)))
    if state.agent is not None:
        tools = ", ".join(f"{t.name} ({t.risk.value})" for t in state.agent.tools) or "none"
        kind = "planning" if state.agent.planning else "plain tool loop"
        console.print(shown(f"agent {state.agent.name} ({kind}), as recorded at start: {tools}"))
    if state.plan:
        console.print(plan_table(state))
    if state.delegations:
        console.print(delegations_table(state))
    if state.approvals:
        table = Table(title="approvals")
        for column in ("request", "tool", "status", "by", "comment"):
            table.add_column(column)
        for a in state.approvals:
            row = (a.request_id, a.tool, a.status.value, a.decided_by or "", a.comment)
            table.add_row(*(shown(value) for value in row))
        console.print(table)
    if state.effects.total:
        listed = len(state.effects.recent)
        table = Table(title=f"effects performed (ledger): {state.effects.total}, last {listed}")
        for column in ("tool", "ok", "idempotency key"):
            table.add_column(column)
        for e in state.effects.recent:
            table.add_row(shown(e.tool), "yes" if e.ok else "refused", shown(e.idempotency_key))
        console.print(table)


def listed_step(run: RunListing) -> str:
    """The step a listing knows: a running run's is where it last changed status, so it
    reads `N+` (its live step is in `agentctl show` and the Web UI's details)."""
    if not run.step:
        return ""
    return f"{run.step}+" if run.status == "running" else str(run.step)


def runs_table(listings: list[RunListing]) -> Table:
    table = Table(title="runs", caption="step N+: running on from step N")
    for column in ("run id", "status", "step", "waiting for", "temporal", "started"):
        table.add_column(column)
    for run in listings:
        row = (
            run.run_id,
            run.status,
            listed_step(run),
            run.waiting_for or run.held_up,
            run.temporal_status,
            run.started_at,
        )
        table.add_row(*(shown(value) for value in row))
    return table


def inbox_table(items: list[InboxItem]) -> Table:
    """What waits for a person: the tool and arguments the model chose, shown as text.
    Ids are shown whole, never cut with an ellipsis, however narrow the terminal: they
    are what a person copies into `agentctl approve` (a `run_agent` child's id is its
    caller's and a suffix, longer than the column rich would give it)."""
    table = Table(title="waiting for a human")
    widest_id = max((len(item.run_id) for item in items), default=6)
    widest_caller = max((len(item.parent or "") for item in items), default=9)
    table.add_column("run id", no_wrap=True, min_width=widest_id)
    table.add_column("waiting for")
    table.add_column("step")
    table.add_column("what", overflow="fold")
    table.add_column("called by", no_wrap=True, min_width=widest_caller)
    for item in items:
        row = (item.run_id, item.waiting_for, str(item.step or ""), item.detail, item.parent)
        table.add_row(*(shown(value or "") for value in row))
    return table


def print_replays(console: Console, outcomes: list[ReplayOutcome]) -> bool:
    """One line per replayed history file, naming the event where one parts ways; whether
    all replayed (`agentctl replay` and `agentctl release check FILES`)."""
    for outcome in outcomes:
        named = f" ({outcome.event_type})" if outcome.event_type else ""
        where = f" at event {outcome.event_id}{named}" if outcome.event_id else ""
        mark = "[green]ok[/]      " if outcome.ok else "[red]DIVERGES[/]"
        console.print(f"{mark} {outcome.path}{where}: {escape(outcome.message)}", soft_wrap=True)
    return all(outcome.ok for outcome in outcomes)
