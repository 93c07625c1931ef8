"""Thread: a conversation's queue and the tail of its turns (None for a run of one goal;
workflows/conversation_records.py)."""

from __future__ import annotations

from datetime import datetime

from durable_agents.workflows.conversation_records import (
    ConversationFields,
    QueuedMessage,
    TurnRecord,
)
from durable_agents.workflows.people_inputs import Actor
from durable_agents.workflows.state.audit_log import AuditLog
from durable_agents.workflows.state.record import Read, Record


class Thread(Record):
    OWNS = frozenset({"conversation"})
    conversation = Read[ConversationFields | None]()

    @property
    def conversation_fields(self) -> ConversationFields:
        assert self._s.conversation is not None, "only a conversation has a thread"
        return self._s.conversation

    def take_message(self, message: QueuedMessage, remembered: int) -> bool:
        """Queue a message once per id (the latest `remembered` ids are known); False for
        an id seen before."""
        convo = self.conversation_fields
        if convo.knows(message.message_id):
            return False
        convo.seen_ids = [*convo.seen_ids, message.message_id][-remembered:]
        convo.queue.append(message)
        return True

    def finish_turn(self, record: TurnRecord, kept: int) -> None:
        """The message at the queue's head is answered (or failed): its turn is kept (the
        latest `kept` turns stay) and counted."""
        convo = self.conversation_fields
        convo.queue.pop(0)
        convo.turns = [*convo.turns, record][-kept:]
        convo.turns_total += 1
        convo.turns_this_run += 1

    def close(self, actor: Actor, now: datetime) -> None:
        """No more messages: the queued ones are answered, then the run completes."""
        convo = self.conversation_fields
        convo.closed, convo.closed_by = True, actor.by
        AuditLog(self._s).log(now, actor.by, "conversation_closed", actor.reason)

    def new_run(self) -> None:
        """The conversation continues as new: this run of the chain has answered none."""
        self.conversation_fields.turns_this_run = 0

    def call_key(self, call_id: str) -> str:
        """A tool call's part of its idempotency key: the model's call id, and in a
        conversation the message the turn answers too, so a turn number used again (after
        a rewind) with a model that numbers its calls never finds another turn's effect."""
        convo = self._s.conversation
        if convo is None or not convo.queue or self._s.current_step is None:
            return call_id
        return f"{convo.queue[0].message_id}/{call_id}"
