"""The console's chat view of a conversation: its composer posts a message as the
signed-in user (signed with the console's key, so a conversation whose policy requires
signed changes counts it), and returns once the conversation has queued it; the reply
streams into the page through the run's events (console/deltas.py)."""

from __future__ import annotations

from fastapi import FastAPI, Request, Response
from pydantic import Field

from durable_agents.console.actions import Form, acting, done, parse_form, refused
from durable_agents.console.web import PageError
from durable_agents.control import conversations
from durable_agents.control.runs import RunError
from durable_agents.workflows.conversation_records import MESSAGE_CHARS


class MessageForm(Form):
    text: str = Field(min_length=1, max_length=MESSAGE_CHARS)


def register(app: FastAPI) -> None:
    @app.post("/runs/{run_id}/messages")
    async def send_message(request: Request, run_id: str) -> Response:
        console, user, fields, state = await acting(request, run_id)
        form = parse_form(MessageForm, fields)
        if state.conversation is None:
            raise PageError(409, f"{run_id} is not a conversation; it takes no messages")
        try:
            sent = conversations.message(form.text, by=user)
            await conversations.post(console.client, run_id, sent, console.signer)
        except RunError as err:
            raise refused(err) from None
        return done(request, run_id, f"sent by {user}")
