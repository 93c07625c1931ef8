"""A conversation's entries (data models, not records of the state: the Thread record,
workflows/state/thread.py, owns them in the state): what a person sends (a message),
what the run keeps of its thread (the queue, the recent turns, the ids it has seen) and
what a sender hears back.

A conversation is a run whose story is turns: each message a person sends is answered by
a turn of the tool loop (workflows/phases/conversation.py). Everything here is bounded, so
the state a conversation carries over a continue-as-new stays the same size after a week
of turns as after one; the whole thread stays in the transcript store.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from durable_agents.workflows.contract_base import NAME, StrictModel
from durable_agents.workflows.people_inputs import SignedDecision

# Messages waiting for their turn at most (the rest are refused: "send again once it has
# answered"); a conversation is a chat, not a work queue.
MAX_QUEUED = 8
# Senders waiting in an update for a reply at most: Temporal takes 10 updates in flight per
# run, and the rest are kept for the people who decide (decide, submit_answer, budget).
MAX_WAITERS = 5
# ...and of those, one sender's at most: one sender (or one name) cannot fill either for
# everyone else.
MAX_QUEUED_PER_SENDER = 4
MAX_WAITERS_PER_SENDER = 2
# Updates one run of the chain takes before it continues as new, idle or not: Temporal
# refuses updates past 2,000 in one run's history.
UPDATES_PER_RUN = 500
# What a sender hears while the conversation moves to a fresh run of its chain.
MOVING = "the conversation is moving to a fresh run of its chain; send again in a moment"
# Turns the state keeps whole (the thread's tail); earlier ones are in the transcript store.
TURNS_KEPT = 20
# Message ids remembered, so a sender retrying a message never gets two turns for it.
IDS_REMEMBERED = 200
# A message's length: a person's chat message, not a document (tools read documents).
MESSAGE_CHARS = 8000
# What a turn record keeps of the person's message in the state.
MESSAGE_PREVIEW_CHARS = 500
# How many turns one run of the chain answers before it continues as new (the history
# stays far under Temporal's limits).
TURNS_PER_RUN = 50
# What the model sees of a long conversation: its first message and the turns the state
# keeps (TURNS_KEPT), so a turn costs the same in week three as on day one.

TurnStatus = Literal["answered", "failed"]
ReplyStatus = Literal["answered", "failed", "waiting", "queued", "carried", "closed"]


class UserMessage(StrictModel):
    """Update payload for `send_message`: a person's message. `message_id` names it, so
    sending it again (a retry after a lost answer) is the same message, never a second."""

    message_id: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._:-]+$")
    text: str = Field(min_length=1, max_length=MESSAGE_CHARS)
    by: str = NAME
    signed: SignedDecision | None = None
    # Wait for the reply (the update completes when the turn ends or stops for a person);
    # False: answered `queued` once the message is queued (the console, `agentctl chat`).
    wait: bool = True

    def what_it_says(self) -> dict[str, str]:
        """What a signature over this message covers."""
        return {"message_id": self.message_id, "text": self.text}


class ReplyWanted(StrictModel):
    """Update payload for `await_reply`: the message whose reply the caller waits for, and
    who waits (signed, as a message is, when the run requires signed changes)."""

    message_id: str = Field(min_length=1, max_length=100)
    # Clients from before senders were named wait as "anonymous".
    by: str = Field(default="anonymous", min_length=1, max_length=100)
    signed: SignedDecision | None = None

    def what_it_says(self) -> dict[str, str]:
        """What a signature over this wait covers."""
        return {"message_id": self.message_id}


class QueuedMessage(BaseModel):
    """A message waiting for its turn, as the state carries it."""

    message_id: str
    text: str
    by: str
    received_at: datetime


class TurnRecord(BaseModel):
    """One answered (or failed) turn: who said what, and the agent's reply."""

    turn: int
    message_id: str
    by: str
    message: str  # a preview (MESSAGE_PREVIEW_CHARS); the whole is in the transcript
    reply: str = ""
    status: TurnStatus = "answered"
    error: str | None = None
    # Where the turn's messages are in the transcript: the person's, then the final reply.
    message_seq: int | None = None
    reply_seq: int | None = None
    started_at: datetime
    finished_at: datetime | None = None


class ConversationFields(BaseModel):
    """The conversation part of a run's state (RunState.conversation)."""

    turns_total: int = 0
    # Turns answered by this run of the chain (continue-as-new starts it again at 0).
    turns_this_run: int = 0
    queue: list[QueuedMessage] = Field(default_factory=list)
    turns: list[TurnRecord] = Field(default_factory=list)
    seen_ids: list[str] = Field(default_factory=list)
    closed: bool = False
    closed_by: str | None = None

    def knows(self, message_id: str) -> bool:
        return message_id in self.seen_ids

    def turn_of(self, message_id: str) -> TurnRecord | None:
        return next((t for t in reversed(self.turns) if t.message_id == message_id), None)

    def is_queued(self, message_id: str) -> bool:
        return any(m.message_id == message_id for m in self.queue)


class TurnReply(StrictModel):
    """What `send_message` and `await_reply` answer: the reply once the turn is over, or
    why there is none yet (`waiting`: the turn stopped for a person, `waiting_for` says
    for what; `carried`: the conversation moved to a fresh run of its chain, ask it again
    with `await_reply`)."""

    message_id: str
    status: ReplyStatus
    turn: int | None = None
    reply: str = ""
    waiting_for: str = ""
    error: str | None = None

    @property
    def done(self) -> bool:
        return self.status in ("answered", "failed", "closed")


class ConversationView(StrictModel):
    """The `conversation` query's answer: the thread's tail and what waits."""

    run_id: str
    agent: str | None
    status: str
    turns_total: int
    closed: bool
    waiting_for: str
    queued: list[QueuedMessage]
    turns: list[TurnRecord]
    # Senders waiting in an update for a reply now (at most MAX_WAITERS).
    waiters: int = 0
