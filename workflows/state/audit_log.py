"""AuditLog: every change and who made it (and when the state last changed)."""

from __future__ import annotations

from datetime import datetime

from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.records import AuditEntry
from durable_agents.workflows.state.record import Record


class AuditLog(Record):
    OWNS = frozenset({"audit", "updated_at"})

    def log(self, now: datetime, actor: str, action: str, detail: str = "") -> None:
        self._s.audit.append(AuditEntry(at=now, actor=actor, action=action, detail=detail))
        self.touch(now)

    def touch(self, now: datetime) -> None:
        self._set(updated_at=now)

    def refused(self, by: str, error: str, now: datetime) -> None:
        """A change that did not count, and why (the audit keeps every attempt)."""
        self.log(now, "policy", "decision_refused", preview(f"{by}: {error}", 500))

    def trim(self, kept: int) -> None:
        self._set(audit=self._s.audit[-kept:])
