"""ToolOutcomes: what the run's tool calls came to (the latest results, and how many in
all) and the side effects the effect ledger recorded."""

from __future__ import annotations

from datetime import datetime

from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import EFFECTS_LISTED, EffectsReport, EffectSummary
from durable_agents.workflows.records import RECENT_RESULTS_KEPT, ToolResultRecord
from durable_agents.workflows.state.audit_log import AuditLog
from durable_agents.workflows.state.record import Read, Record
from durable_agents.workflows.state.transcript import Transcript


class ToolOutcomes(Record):
    OWNS = frozenset({"results", "results_total", "effects"})
    effects = Read[EffectsReport]()

    def record(
        self, step: int, call_id: str, tool: str, *, ok: bool, summary: str, seq: int, now: datetime
    ) -> None:
        record = ToolResultRecord(
            step=step, tool_call_id=call_id, tool=tool, ok=ok, summary=summary, seq=seq
        )
        results = [*self._s.results, record][-RECENT_RESULTS_KEPT:]
        self._set(results=results, results_total=self._s.results_total + 1)
        AuditLog(self._s).touch(now)

    def tell(
        self,
        step: int,
        call_id: str,
        tool: str,
        *,
        ok: bool,
        text: str,
        now: datetime,
        seq: int | None = None,
    ) -> None:
        """A tool call's result the workflow words itself (a failure, a sub-agent's answer):
        the model hears `text`; the record points at `seq` (else at what it hears)."""
        told = Transcript(self._s).queue_message("tool", text, call_id)
        at = seq if seq is not None else told.seq
        self.record(step, call_id, tool, ok=ok, summary=preview(text), seq=at, now=now)

    def record_effect(self, effect: EffectSummary) -> None:
        effects = self._s.effects
        recent = [*effects.recent, effect][-EFFECTS_LISTED:]
        self._set(effects=EffectsReport(total=effects.total + 1, recent=recent))

    def forked(self, restarting: set[int]) -> None:
        """The restarting step's results are the fork's to make again; the parent's effects
        were the parent's."""
        results = [r for r in self._s.results if r.step not in restarting]
        self._set(results=results, effects=EffectsReport())
