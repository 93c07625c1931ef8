"""agentctl chat: talk to an agent in the terminal. The reply prints as the model writes
it (from the live log, where this machine reaches the stores), a turn that stops for an
approval says so inline, and the conversation is resumed by its id another day.

Lines starting with / are commands: /approve [ID] [comment], /reject [ID] [comment],
/answer TEXT, /thread, /close (no more messages), /quit (leave it open), /help.
"""

from __future__ import annotations

import asyncio
import getpass
import sys
from typing import Annotated

import typer
from temporalio.client import Client

from durable_agents.control import conversations, runs
from durable_agents.control.agents import checked_request, local_agents
from durable_agents.control.live import LiveReplies
from durable_agents.control.runs import RunError
from durable_agents.control.signer import Signer
from durable_agents.infra.offline_model.chat import stream_shape
from durable_agents.infra.offline_model.scenarios import ScenarioSpec
from durable_agents.runtime.client import connect
from durable_agents.runtime.settings import Settings, load_settings
from durable_agents.starters.cli_options import Flags, options_from_flags, start_flags
from durable_agents.starters.cli_people import own_signer
from durable_agents.starters.errors import run_async
from durable_agents.starters.terminal import SafeConsole, shown
from durable_agents.workflows.conversation_records import TurnReply
from durable_agents.workflows.people_inputs import Actor, Answer, DecideRequest
from durable_agents.workflows.start_options import conversation_title

console = SafeConsole()
HELP = (
    "/approve [ID] [comment]  /reject [ID] [comment]  /answer TEXT  /thread  "
    "/close (end the conversation)  /quit (leave it open)"
)


@run_async
@start_flags  # --subject, --policy, --limits, --budget: every start option but the label
async def chat(
    agent: Annotated[str, typer.Argument(help="The agent to talk to.")],
    conversation_id: Annotated[
        str | None, typer.Option("--id", help="Resume this conversation (or open it).")
    ] = None,
    by: Annotated[str | None, typer.Option("--as", help="Who speaks (default: you).")] = None,
    label: Annotated[
        str | None,
        typer.Option(help="The conversation's label (the offline model: its chat scenario)."),
    ] = None,
    message: Annotated[
        list[str] | None,
        typer.Option("--message", "-m", help="Send this (repeatable), print the replies, leave."),
    ] = None,
    *,
    flags: Flags,
) -> None:
    """Talk to an agent: each line you type is a message, answered by a turn."""
    settings = load_settings()
    signer = own_signer(settings)
    speaker = by or getpass.getuser()
    label = _label(settings, label)
    options = options_from_flags(**flags, label=label)
    request = checked_request(
        local_agents(), agent, conversation_title(agent), options, conversation=True
    )
    client = await connect(settings)
    started = await conversations.open_conversation(client, settings, request, conversation_id)
    cid = started.run_id
    verb = "resumed" if started.attached else "opened"
    console.print(f"[bold]{verb} conversation {cid}[/bold] with {agent} · {HELP}")
    talk = Talk(client, settings, cid, speaker, signer)
    try:
        if started.attached:
            await talk.show_thread(last=6)
        if message:
            for text in message:
                await talk.say(text)
            return
        await talk.interactive()
    finally:
        await talk.close()


def printable(text: str) -> str:
    """A model's text for the terminal: no escape or control character (a reply could
    carry one to rewrite the screen), line breaks and tabs kept."""
    return "".join(ch if ch in "\n\t" or ch.isprintable() else "\ufffd" for ch in text)


def _label(settings: Settings, label: str | None) -> str | None:
    """The offline model plays its `chat` scenario unless told another; checked first."""
    if not settings.uses_offline_model:
        return label
    spec = ScenarioSpec.parse(label or "chat")
    if spec.name == "chat":
        stream_shape(spec)
    return label or "chat"


class Talk:
    """One person's side of a conversation in the terminal."""

    def __init__(
        self, client: Client, settings: Settings, cid: str, by: str, signer: Signer | None
    ) -> None:
        self.client, self.cid, self.by, self.signer = client, cid, by, signer
        self.live = LiveReplies.reachable(settings)
        # The message whose turn stopped for a person: its reply follows a decision.
        self._waiting_on: str | None = None

    async def close(self) -> None:
        if self.live is not None:
            await self.live.close()

    async def interactive(self) -> None:
        while True:
            try:
                line = await asyncio.to_thread(input, f"{self.by}> ")
            except EOFError:
                console.print(f"left {self.cid} open: agentctl chat AGENT --id {self.cid}")
                return
            line = line.strip()
            if not line:
                continue
            try:
                if line.startswith("/"):
                    if not await self.command(line):
                        return
                else:
                    await self.say(line)
            except RunError as err:
                console.print(f"[red]{shown(str(err))}[/red]")

    async def say(self, text: str) -> None:
        sent = conversations.message(text, by=self.by)
        start = await self._live_start()
        await conversations.post(self.client, self.cid, sent, self.signer)
        waiting = asyncio.ensure_future(
            conversations.await_reply(
                self.client, self.cid, sent.message_id, by=self.by, signer=self.signer
            )
        )
        printed = await self._print_live(start, waiting)
        self._print_reply(await waiting, printed)

    async def _live_start(self) -> int | None:
        if self.live is None:
            return None
        return await asyncio.to_thread(self.live.store.start_point, self.cid)

    async def _print_live(self, pos: int | None, waiting: asyncio.Future[TurnReply]) -> bool:
        """Print the reply's pieces as they land, until the turn is over; a segment the
        worker abandoned (it died mid-reply) is marked, and the retry's text follows."""
        if self.live is None or pos is None:
            return False
        printed = False
        while True:
            entries = await self.live.after(self.cid, pos, wait=0.1)
            for entry in entries:
                if entry.kind == "open" and printed:
                    sys.stdout.write("\n")
                if entry.kind == "delta":
                    sys.stdout.write(printable(entry.text))
                    printed = True
                elif entry.kind == "abandoned" and printed:
                    sys.stdout.write("\n[the reply was cut off; the worker restarted it]\n")
                sys.stdout.flush()
                pos = entry.pos
            if waiting.done() and not entries:
                if printed:
                    sys.stdout.write("\n")
                return printed

    def _print_reply(self, reply: TurnReply, printed: bool) -> None:
        if reply.status == "waiting":
            console.print(f"[yellow]⏸ turn {reply.turn} waits for {shown(reply.waiting_for)}")
            console.print("  decide with /approve or /reject (then the reply follows)")
            self._waiting_on = reply.message_id
        elif reply.status == "failed":
            console.print(f"[red]turn {reply.turn} failed: {shown(reply.error or '?')}[/red]")
        elif reply.status == "closed":
            console.print("the conversation is closed")
        elif not printed:
            console.print(shown(reply.reply))

    async def command(self, line: str) -> bool:
        """Carry out a /command; False when the chat should end."""
        name, _, rest = line[1:].partition(" ")
        if name in ("quit", "exit"):
            console.print(f"left {self.cid} open: agentctl chat AGENT --id {self.cid}")
            return False
        if name == "close":
            await conversations.close(self.client, self.cid, Actor(by=self.by), self.signer)
            console.print(f"closed {self.cid}: queued messages are answered, then it ends")
            return False
        if name in ("approve", "reject"):
            request_id, _, comment = rest.strip().partition(" ")
            decision = DecideRequest(
                request_id=request_id or None, approve=name == "approve", by=self.by,
                comment=comment,
            )  # fmt: skip
            console.print(shown(await runs.decide(self.client, self.cid, decision, self.signer)))
            await self._resume_reply()
        elif name == "answer":
            reply = Answer(answer=rest.strip() or "-", by=self.by)
            console.print(shown(await runs.answer(self.client, self.cid, reply, self.signer)))
            await self._resume_reply()
        elif name == "thread":
            await self.show_thread()
        else:
            console.print(HELP)
        return True

    async def _resume_reply(self) -> None:
        """After a decision, the turn that waited goes on: print its reply."""
        if self._waiting_on is None:
            return
        message_id, self._waiting_on = self._waiting_on, None
        start = await self._live_start()
        waiting = asyncio.ensure_future(
            conversations.await_reply(
                self.client, self.cid, message_id, by=self.by, signer=self.signer
            )
        )
        printed = await self._print_live(start, waiting)
        self._print_reply(await waiting, printed)

    async def show_thread(self, last: int | None = None) -> None:
        view = await conversations.thread(self.client, self.cid)
        turns = view.turns[-last:] if last else view.turns
        for turn in turns:
            console.print(f"[dim]{shown(turn.by)}>[/dim] {shown(turn.message)}")
            console.print(f"[dim]{shown(view.agent or 'agent')}:[/dim] {shown(turn.reply)}")
        if view.waiting_for:
            console.print(f"[yellow]⏸ waits for {shown(view.waiting_for)}")
            if view.queued:  # a decision made here resumes that turn's reply
                self._waiting_on = view.queued[0].message_id


def register(app: typer.Typer) -> None:
    app.command()(chat)
