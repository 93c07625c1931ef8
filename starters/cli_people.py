"""agentctl approve, reject, answer, pause, resume, cancel, edit, budget, inbox: a person
acting on a live run. Each takes --as NAME for the record."""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from durable_agents.control import callers, runs
from durable_agents.control.signer import Signer, settings_signer
from durable_agents.runtime import operator_files
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import Settings, load_settings
from durable_agents.starters.errors import RunIdArgument, fail, run_async
from durable_agents.starters.render import inbox_table
from durable_agents.starters.terminal import SafeConsole, shown
from durable_agents.workflows.people_inputs import Actor, Answer, DecideRequest, StatePatch
from durable_agents.workflows.run_summary import progress_line

console = SafeConsole()
AsOption = Annotated[str | None, typer.Option("--as", help="Who is acting (default: you).")]


def _who(name: str | None) -> str:
    return name or getpass.getuser()


def own_signer(settings: Settings) -> Signer | None:
    """The person's own key (AGENT_SIGNING_KEY_FILE), when they have one: decisions are
    then signed, and a run whose policy trusts the key counts them."""
    try:
        return settings_signer(settings, _who(None))
    except ValueError as err:
        raise fail(str(err)) from None


def _decision_command(approve: bool):  # type: ignore[no-untyped-def]
    @run_async
    async def decide(
        run_id: RunIdArgument,
        request_id: Annotated[
            str | None, typer.Argument(help="Which request (default: the only one pending).")
        ] = None,
        by: AsOption = None,
        comment: Annotated[str, typer.Option(help="Why; recorded with the decision.")] = "",
    ) -> None:
        request = DecideRequest(
            request_id=request_id, approve=approve, by=_who(by), comment=comment
        )
        settings = load_settings()
        signer = own_signer(settings)  # a bad key file is refused before connecting
        client = await connect(settings)
        said = await callers.act_for_person(
            client, run_id, "approval", lambda run: runs.decide(client, run, request, signer)
        )
        console.print(shown(said))

    verb = "Approve" if approve else "Reject"
    decide.__doc__ = (
        f"{verb} a pending tool call. RUN_ID may be your own workflow's id: its one agent "
        "run (run_agent) that waits for an approval is meant."
    )
    return decide


@run_async
async def answer(
    run_id: RunIdArgument,
    text: Annotated[str, typer.Argument(help="The answer (one of the options, if offered).")],
    question_id: Annotated[str | None, typer.Option(help="Which question.")] = None,
    by: AsOption = None,
) -> None:
    """Answer the question a run asked (RUN_ID may be your own workflow's, as for approve)."""
    reply = Answer(question_id=question_id, answer=text, by=_who(by))
    settings = load_settings()
    signer = own_signer(settings)
    client = await connect(settings)
    said = await callers.act_for_person(
        client, run_id, "input", lambda run: runs.answer(client, run, reply, signer)
    )
    console.print(shown(said))


def _actor_command(verb: str, doc: str):  # type: ignore[no-untyped-def]
    @run_async
    async def act(
        run_id: RunIdArgument,
        by: AsOption = None,
        reason: Annotated[str, typer.Option(help="Why; recorded in the audit log.")] = "",
    ) -> None:
        settings = load_settings()
        signer = own_signer(settings)
        client = await connect(settings)
        await getattr(runs, verb)(client, run_id, Actor(by=_who(by), reason=reason), signer)
        console.print(f"{verb} sent to {run_id}")

    act.__doc__ = doc
    return act


def parse_assignments(assignments: list[str]) -> dict[str, Any]:
    """`path=value` pairs; a value that parses as JSON is taken as JSON, else as text."""
    patch: dict[str, Any] = {}
    for item in assignments:
        path, sep, value = item.partition("=")
        if not sep or not path:
            raise fail(f"--set takes path=value, not {item!r}")
        try:
            patch[path.strip()] = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            patch[path.strip()] = value
    return patch


@run_async
async def edit(
    run_id: RunIdArgument,
    assignments: Annotated[
        list[str] | None,
        typer.Option("--set", help="goal=TEXT, pending_steps='[\"a\",\"b\"]', context='[...]'"),
    ] = None,
    patch_file: Annotated[
        Path | None, typer.Option("--file", help="A JSON patch file.", exists=True)
    ] = None,
    by: AsOption = None,
) -> None:
    """Edit a live run's goal, remaining steps or gathered context."""
    if bool(assignments) == bool(patch_file):
        raise fail("give either --set path=value (one or more) or --file patch.json")
    if patch_file is not None:
        try:
            fields = operator_files.load_json(patch_file)
        except (OSError, ValueError) as err:
            raise fail(f"{patch_file}: {err}") from None
        if not isinstance(fields, dict):
            raise fail(f"{patch_file}: the patch must be a JSON object")
    else:
        fields = parse_assignments(assignments or [])
    patch = StatePatch.model_validate({**fields, "by": _who(by)})
    settings = load_settings()
    signer = own_signer(settings)
    client = await connect(settings)
    state = await runs.edit(client, run_id, patch, signer)
    console.print(shown(f"edited {run_id}: {progress_line(state)}"))


@run_async
async def budget(
    run_id: RunIdArgument,
    usd: Annotated[
        float | None, typer.Option(help="Dollars, for the run and its sub-agents.")
    ] = None,
    tokens: Annotated[int | None, typer.Option(help="Model tokens (input and output).")] = None,
    tool_calls: Annotated[
        int | None, typer.Option(help="Tool calls, delegations included.")
    ] = None,
    seconds: Annotated[float | None, typer.Option(help="Seconds since the run started.")] = None,
    by: AsOption = None,
    comment: Annotated[str, typer.Option(help="Why; recorded with the change.")] = "",
) -> None:
    """Set a run's budget (limits left out stay); a run waiting at its budget goes on, and
    the sub-agent it waits on gets what is left. To stop it instead: `reject`."""
    raise_ = runs.budget_raise(
        _who(by), usd=usd, tokens=tokens, tool_calls=tool_calls, seconds=seconds, comment=comment
    )
    settings = load_settings()
    signer = own_signer(settings)
    client = await connect(settings)
    new = await runs.raise_budget(client, run_id, raise_, signer)
    console.print(f"budget of {run_id}: {new.model_dump(exclude_none=True)}")


@run_async
async def inbox(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Every run of this task queue that waits for a human, and for what."""
    settings = load_settings()
    items = await runs.inbox(await connect(settings), task_queue=settings.task_queue)
    if as_json:
        typer.echo(json.dumps([item.__dict__ for item in items]))
        return
    console.print(inbox_table(items))


def register(app: typer.Typer) -> None:
    app.command("approve")(_decision_command(True))
    app.command("reject")(_decision_command(False))
    app.command()(answer)
    app.command("pause")(_actor_command("pause", "Pause a run once its activity in flight ends."))
    app.command("resume")(_actor_command("resume", "Resume a paused run."))
    app.command("cancel")(_actor_command("cancel", "Cancel a run; no half-done effect is left."))
    app.command()(edit)
    app.command()(budget)
    app.command()(inbox)
