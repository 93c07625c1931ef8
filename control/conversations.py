"""Client-side verbs on conversations: open one, send a message and wait for its reply
(across an approval or a continue-as-new), read the thread, close it. The CLI, the console
and `durable_agents.client` call these; the rules live in the workflow."""

from __future__ import annotations

import asyncio
import uuid
from typing import Unpack

from pydantic import BaseModel
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError

from durable_agents.control import runs, stored
from durable_agents.control.runs import RunError
from durable_agents.control.signer import Signer
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.conversation_records import (
    MOVING,
    ConversationView,
    ReplyWanted,
    TurnReply,
    UserMessage,
)
from durable_agents.workflows.people_inputs import Actor
from durable_agents.workflows.start_options import (
    StartFields,
    StartOptions,
    StartOptionsError,
    conversation_title,
)

# Who speaks for the agent in a thread.
AGENT_SPEAKER = "agent"

# How long a sender keeps asking a conversation that moves to a fresh run (continue-as-new)
# before it gives up, and how long it waits between two asks; the fresh run is up within a
# workflow task.
CARRIED_RETRY_SECONDS = 60.0
CARRIED_PAUSE_SECONDS = 0.1


def new_message_id() -> str:
    return f"msg-{uuid.uuid4().hex[:16]}"


def conversation_request(
    agent: str, *, title: str | None = None, **options: Unpack[StartFields]
) -> RunRequest:
    """A conversation's start request, its options checked (RunError in one line); the
    agent is not looked up here (the workflow refuses one its worker does not have)."""
    try:
        return StartOptions.of(**options).request(
            agent, title or conversation_title(agent), conversation=True
        )
    except StartOptionsError as err:
        raise RunError(str(err)) from None


async def open_conversation(
    client: Client, settings: Settings, request: RunRequest, conversation_id: str | None
) -> runs.StartedRun:
    """Start the conversation, or resume the one running under that id (same agent)."""
    return await runs.start_run(client, settings, request, conversation_id)


def message(text: str, *, by: str, message_id: str | None = None) -> UserMessage:
    try:
        return UserMessage(message_id=message_id or new_message_id(), text=text, by=by)
    except ValueError as err:
        raise RunError(f"invalid message: {_first(err)}") from None


async def send(
    client: Client, run_id: str, sent: UserMessage, signer: Signer | None = None
) -> TurnReply:
    """Send a message and wait until its turn ends or stops for a person (the reply says
    for what). A conversation that continued as new meanwhile is asked again."""
    if signer is not None:
        identity, moment = await runs.signing_point(client, run_id)
        signed = signer.change(identity, sent.by, "message", sent.what_it_says(), moment)
        sent = sent.model_copy(update={"signed": signed})
    reply = await _ask(client, run_id, "send_message", sent)
    return await _past_carried(client, run_id, reply, sent.by, signer)


async def post(
    client: Client, run_id: str, sent: UserMessage, signer: Signer | None = None
) -> None:
    """Send a message without waiting for its reply: returns once the conversation has
    queued it (in order); the reply comes on the run's events, or from `await_reply`.
    What the console's composer and `agentctl chat` do: no update stays open meanwhile."""
    if signer is not None:
        identity, moment = await runs.signing_point(client, run_id)
        signed = signer.change(identity, sent.by, "message", sent.what_it_says(), moment)
        sent = sent.model_copy(update={"signed": signed})
    await _ask(client, run_id, "send_message", sent.model_copy(update={"wait": False}))


async def await_reply(
    client: Client,
    run_id: str,
    message_id: str,
    *,
    by: str = "anonymous",
    signer: Signer | None = None,
) -> TurnReply:
    """Wait again for a message's reply (after approving what its turn waited for): as
    `by`, signed by `signer` where the conversation requires signed changes."""
    wanted = await _wanted(client, run_id, message_id, by, signer)
    reply = await _ask(client, run_id, "await_reply", wanted)
    return await _past_carried(client, run_id, reply, by, signer)


async def _wanted(
    client: Client, run_id: str, message_id: str, by: str, signer: Signer | None
) -> ReplyWanted:
    """A wait for a reply; signed afresh each time (a signature counts once)."""
    wanted = ReplyWanted(message_id=message_id, by=by)
    if signer is not None:
        identity, moment = await runs.signing_point(client, run_id)
        wanted.signed = signer.change(identity, by, "await_reply", wanted.what_it_says(), moment)
    return wanted


async def _past_carried(
    client: Client, run_id: str, reply: TurnReply, by: str, signer: Signer | None
) -> TurnReply:
    while reply.status == "carried":
        await asyncio.sleep(CARRIED_PAUSE_SECONDS)  # the fresh run starts meanwhile
        wanted = await _wanted(client, run_id, reply.message_id, by, signer)
        reply = await _ask(client, run_id, "await_reply", wanted)
    return reply


async def _ask(
    client: Client, run_id: str, name: str, payload: UserMessage | ReplyWanted
) -> TurnReply:
    """The update's answer. While the conversation moves to a fresh run of its chain it
    refuses updates (MOVING): asked again, for up to CARRIED_RETRY_SECONDS."""
    deadline = asyncio.get_running_loop().time() + CARRIED_RETRY_SECONDS
    while True:
        try:
            result: TurnReply = await runs.handle(client, run_id).execute_update(
                name, payload, result_type=TurnReply
            )
            return result
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            message = str(getattr(cause, "message", None) or cause)
            if message != MOVING or asyncio.get_running_loop().time() > deadline:
                raise RunError(f"refused: {message}") from None
        except RPCError as err:
            raise await runs.not_acting(client, run_id, err) from None
        await asyncio.sleep(CARRIED_PAUSE_SECONDS)


async def thread(client: Client, run_id: str) -> ConversationView:
    return await runs.query(client, run_id, "conversation", ConversationView)


async def close(client: Client, run_id: str, actor: Actor, signer: Signer | None = None) -> None:
    """No more messages: those queued are answered, then the conversation completes."""
    if signer is not None:
        identity, moment = await runs.signing_point(client, run_id)
        says = actor.what_it_says()
        actor = actor.model_copy(
            update={"signed": signer.change(identity, actor.by, "end_conversation", says, moment)}
        )
    await runs.signal(client, run_id, "end_conversation", actor)


def _first(err: ValueError) -> str:
    errors = getattr(err, "errors", None)
    if callable(errors):
        first = errors(include_url=False)[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return str(err)


class ThreadLine(BaseModel):
    """One message of a conversation's whole thread, as the transcript store keeps it."""

    speaker: str
    text: str


async def whole_thread(client: Client, settings: Settings, run_id: str) -> list[ThreadLine]:
    """Every message of the conversation since it opened, from the transcript store (the
    state keeps only the last turns): each person's message with who wrote it, and each
    reply of the agent (its tool calls and their results left out)."""
    key = await stored.store_key(client, run_id)
    lines = []
    for message in stored.read_messages(settings, key):
        text = message.get("content") or ""
        if message.get("role") == "user" and message.get("speaker"):
            lines.append(ThreadLine(speaker=message["speaker"], text=text))
        elif message.get("role") == "assistant" and text and not message.get("tool_calls"):
            lines.append(ThreadLine(speaker=AGENT_SPEAKER, text=text))
    return lines
