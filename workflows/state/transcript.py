"""Transcript: where the run's transcript stands (the next message number, the messages
the next model call writes, the people's notes the model must hear, the rows written and
the store that holds them, where the current phase began)."""

from __future__ import annotations

from durable_agents.workflows.activity_io import ChatMessage
from durable_agents.workflows.state.record import Read, Record


class Transcript(Record):
    OWNS = frozenset(
        {"next_seq", "outbox", "transcript_rows", "store_queue", "notes_for_model"}
        | {"phase_start_seq"}
    )
    next_seq = Read[int]()
    transcript_rows = Read[int | None]()
    phase_start_seq = Read[int]()

    def queue_message(
        self, role: str, content: str, tool_call_id: str | None = None, speaker: str | None = None
    ) -> ChatMessage:
        """Queue a small message; the next model call writes it to the transcript."""
        message = ChatMessage.model_validate(
            {
                "seq": self.take_seq(),
                "role": role,
                "content": content,
                "tool_call_id": tool_call_id,
                "speaker": speaker,
            }
        )
        self._s.outbox.append(message)
        return message

    def take_seq(self) -> int:
        seq = self._s.next_seq
        self._set(next_seq=seq + 1)
        return seq

    def begin_phase(self) -> None:
        """The plan, a step or the final answer begins here (a fork restarts it from here)."""
        self._set(phase_start_seq=self._s.next_seq)

    def note_written(self, rows: int) -> None:
        """`rows` more of the run's transcript rows are in its store."""
        if self._s.transcript_rows is not None:
            self._set(transcript_rows=self._s.transcript_rows + rows)

    def held_at(self, queue: str) -> None:
        """The run's store is the one of the worker polling `queue`: its store-bound
        activities go there from now on."""
        self._set(store_queue=queue)

    def rows_copied(self, rows: int | None) -> None:
        """A fork's count starts at what the copy of its parent's past put under its key."""
        self._set(transcript_rows=rows)

    def note_for_model(self, note: str) -> None:
        self._s.notes_for_model.append(note)

    def flush_notes(self) -> None:
        """Queue what people did for the model. Called before a new instruction, and before a
        model call, after every tool result: tool messages stay right behind the assistant
        message that called them."""
        for note in self._s.notes_for_model:
            self.queue_message("user", note)
        self._set(notes_for_model=[])

    def drain_outbox(self) -> list[ChatMessage]:
        self.flush_notes()
        messages = self._s.outbox
        self._set(outbox=[])
        return messages

    def forked(self) -> None:
        """The phase in progress at the fork's moment starts over: its messages are the
        fork's to write again; the transcript rows are counted once the copy is made."""
        self._set(
            next_seq=self._s.phase_start_seq, transcript_rows=None, outbox=[], notes_for_model=[]
        )
