"""Lifecycle: where the run is (its status, a pause or cancel asked for, how it ended)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.people_inputs import Actor
from durable_agents.workflows.records import (
    FINAL_ANSWER_CHARS,
    ApprovalStatus,
    QuestionStatus,
    RunStatus,
)
from durable_agents.workflows.state.audit_log import AuditLog
from durable_agents.workflows.state.record import Read, Record


class Lifecycle(Record):
    OWNS = frozenset(
        {"status", "pause_requested", "cancel_requested_by", "errors", "final_answer", "output"}
    )
    status = Read[RunStatus]()
    final_answer = Read[str | None]()

    def wait_for(self, status: RunStatus) -> None:
        self._set(status=status)

    def leave_wait(self) -> None:
        """A person acted: wait on for what is still asked, or go on."""
        if any(a.status is ApprovalStatus.PENDING for a in self._s.approvals):
            self._set(status=RunStatus.AWAITING_APPROVAL)
        elif any(q.status is QuestionStatus.PENDING for q in self._s.questions):
            self._set(status=RunStatus.AWAITING_INPUT)
        elif not self._s.status.is_closed:
            self._set(status=self._going_on())

    def _going_on(self) -> RunStatus:
        return RunStatus.RUNNING if self._s.plan else RunStatus.PLANNING

    def run(self) -> None:
        self._set(status=RunStatus.RUNNING)

    def request_pause(self, actor: Actor, now: datetime) -> None:
        self._set(pause_requested=True)
        AuditLog(self._s).log(now, actor.by, "pause_requested", actor.reason)

    def enter_pause(self) -> None:
        self._set(status=RunStatus.PAUSED)

    def resume(self, actor: Actor, now: datetime) -> None:
        self._set(pause_requested=False)
        if self._s.status is RunStatus.PAUSED:
            self.leave_wait()
        AuditLog(self._s).log(now, actor.by, "resumed", actor.reason)

    def request_cancel(self, actor: Actor, now: datetime) -> None:
        self._set(cancel_requested_by=actor.by)
        AuditLog(self._s).log(now, actor.by, "cancel_requested", actor.reason)

    def cancel(self, now: datetime) -> None:
        """The run ends cancelled (state.cancel closes what it asked people, too)."""
        self._set(status=RunStatus.CANCELLED)
        AuditLog(self._s).log(now, self._s.cancel_requested_by or "temporal", "run_cancelled")

    def keep_output(self, output: dict[str, Any]) -> None:
        self._set(output=output)

    def complete(self, answer: str, now: datetime) -> None:
        self._set(final_answer=answer[:FINAL_ANSWER_CHARS], status=RunStatus.COMPLETED)
        AuditLog(self._s).log(now, "system", "run_completed")

    def fail(self, error: str, now: datetime) -> None:
        self._set(errors=[*self._s.errors, error], status=RunStatus.FAILED)
        AuditLog(self._s).log(now, "system", "run_failed", preview(error))

    def forked(self) -> None:
        """A fork starts where its parent was, without its parent's asks or ending."""
        self._set(
            errors=[],
            final_answer=None,
            pause_requested=False,
            cancel_requested_by=None,
            status=self._going_on(),
        )

    def trim(self, kept: int) -> None:
        self._set(errors=self._s.errors[-kept:])
