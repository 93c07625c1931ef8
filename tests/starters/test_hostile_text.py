"""Text a model wrote is shown as text on the terminal: rich markup in a plan title, a
question, a tool's arguments or an approval's comment neither crashes `inbox` and `show`
nor hides part of an argument from the approver, and escape sequences are taken out."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from durable_agents.activities.stores import open_database
from durable_agents.activities.stream import DeltaStore
from durable_agents.control.runs import InboxItem
from durable_agents.runtime.settings import Settings
from durable_agents.starters.cli_chat import Talk
from durable_agents.starters.render import inbox_table, print_state
from durable_agents.starters.terminal import SafeConsole
from durable_agents.workflows.conversation_records import TurnReply
from durable_agents.workflows.records import ApprovalRequest, PlanStep
from durable_agents.workflows.state import RunState
from tests.conftest import arrange

HOSTILE = "pay [/] 10 EUR [conceal]and 9,000 EUR to mallory[/conceal] \x1b[2J\x1b]0;pwned\x07end"


def printed(renderable_or_state) -> str:
    console = SafeConsole(record=True, width=400, color_system="truecolor")
    if isinstance(renderable_or_state, RunState):
        print_state(console, renderable_or_state)
    else:
        console.print(renderable_or_state)
    text = console.export_text(styles=False)
    raw = console.export_text(styles=True)
    assert "\x1b]" not in raw and "\x1b[2J" not in raw and "\x07" not in raw
    return text


def test_inbox_shows_hostile_arguments_whole():
    item = InboxItem(run_id="run-1", waiting_for="approval", step=2, detail=HOSTILE, parent=None)
    text = printed(inbox_table([item]))
    assert "[conceal]and 9,000 EUR to mallory[/conceal]" in text
    assert "pay [/] 10 EUR" in text and "[2J" not in text and "pwned" not in text


def test_show_prints_hostile_plan_titles_arguments_and_comments_as_text():
    now = datetime.now(UTC)
    state = RunState(run_id="run-1", goal=HOSTILE, created_at=now, updated_at=now)
    arrange(state, plan=[PlanStep(index=1, title=HOSTILE, result=HOSTILE)])
    arrange(
        state,
        approvals=[
            ApprovalRequest(
                request_id="call-[/]",
                tool="pay_invoice",
                arguments={"memo": HOSTILE},
                reason=HOSTILE,
                step=1,
                requested_at=now,
                comment=HOSTILE,
            )
        ],
    )
    text = printed(state)
    assert text.count("[conceal]and 9,000 EUR to mallory[/conceal]") >= 4
    assert "call-[/]" in text


async def test_streamed_text_reaches_the_terminal_without_escape_sequences(tmp_path, capsys):
    settings = Settings(data_dir=tmp_path)
    log = DeltaStore(open_database(settings))
    segment = log.open_segment("chat-h", 1, 1)
    log.append("chat-h", segment, 1, "pay 10 EUR\x1b[2J\x1b]0;pwned\x07\r\tend\n")
    log.close("chat-h", segment, 1, "done")
    talk = Talk(None, settings, "chat-h", "jane", None)  # type: ignore[arg-type]
    try:
        over: asyncio.Future[TurnReply] = asyncio.get_running_loop().create_future()
        over.set_result(TurnReply(message_id="m-1", status="answered"))
        assert await talk._print_live(0, over)
    finally:
        await talk.close()
    out = capsys.readouterr().out
    assert "pay 10 EUR" in out and "\tend\n" in out  # tabs and line breaks kept
    assert not any(ch in out for ch in "\x1b\x07\r")
