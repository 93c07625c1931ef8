"""`agentctl chat` as a person uses it: lines typed on stdin, the reply printed as it
streams, an approval shown inline and decided with /approve, then the conversation
resumed by its id another time."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

from durable_agents.infra.stack import settings_env
from durable_agents.worker.main import build_worker

AGENTCTL = str(Path(sys.executable).parent / "agentctl")


async def agentctl(settings, *args: str, stdin: str = "") -> tuple[int, str, str]:
    env = {**os.environ, **settings_env(settings), "COLUMNS": "200"}
    process = await asyncio.create_subprocess_exec(
        AGENTCTL,
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_chat_in_the_terminal_streams_asks_and_resumes(dev_env, settings):
    cid = f"chat-{uuid.uuid4().hex[:8]}"
    typed = "Hi there\nPlease refund A-1001 20.00\n/approve\n/quit\n"
    async with build_worker(dev_env.client, settings):
        code, out, err = await agentctl(
            settings, "chat", "support-chat", "--id", cid, "--as", "jane", stdin=typed
        )
        assert code == 0, err
        assert f"opened conversation {cid}" in out
        assert "You said: Hi there" in out
        assert "waits for approval of refund_order" in out
        # The customer may not approve her own refund: refused in one line, chat goes on.
        assert "jane may not decide refund_order" in out.replace("\n", " ")
        assert f"left {cid} open" in out

        # The support lead resumes the same conversation, sees it waiting, and approves.
        code, lead, err = await agentctl(
            settings, "chat", "support-chat", "--id", cid, "--as", "support-lead",
            stdin="/approve\n/quit\n",
        )  # fmt: skip
        assert code == 0, err
        assert f"resumed conversation {cid}" in lead
        assert "jane> Hi there" in lead  # the thread so far, shown on resuming
        assert "waits for approval of refund_order" in lead
        assert "approved: refund_order" in lead
        assert "Done: " in lead and "refunded" in lead

        code, again, err = await agentctl(
            settings, "chat", "support-chat", "--id", cid, "--as", "jane", "-m", "Thanks!"
        )
        assert code == 0, err
        assert "You said: Thanks!" in again

        code, _, err = await agentctl(settings, "chat", "support-chat", "--id", cid, "-m", "")
        assert code == 1 and err.strip().startswith("error: invalid message: text")
        code, _, err = await agentctl(
            settings, "chat", "support-chat", "--label", "chat?hold=a b", "-m", "x"
        )
        assert code == 1 and "hold" in err and len(err.strip().splitlines()) == 1
