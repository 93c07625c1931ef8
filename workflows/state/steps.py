"""Steps: the run's plan (a conversation's turns), the step in progress, and the context
its finished steps gathered."""

from __future__ import annotations

from datetime import datetime

from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.records import RECENT_RESULTS_KEPT, PlanStep, StepStatus
from durable_agents.workflows.state.audit_log import AuditLog
from durable_agents.workflows.state.lifecycle import Lifecycle
from durable_agents.workflows.state.record import Read, Record


class Steps(Record):
    OWNS = frozenset({"plan", "current_step", "context"})
    plan = Read[list[PlanStep]]()
    current_step = Read[int | None]()
    context = Read[list[str]]()

    @property
    def completed(self) -> list[PlanStep]:
        return [s for s in self._s.plan if s.status is StepStatus.DONE]

    def set_plan(self, titles: list[str], now: datetime) -> None:
        self._set(plan=[PlanStep(index=i, title=t) for i, t in enumerate(titles, start=1)])
        Lifecycle(self._s).run()
        AuditLog(self._s).log(now, "model", "plan_set", f"{len(titles)} steps")

    def next_step(self) -> PlanStep | None:
        return next((s for s in self._s.plan if s.status is not StepStatus.DONE), None)

    def add_turn(self, step: PlanStep, kept: int) -> None:
        """A conversation's next turn, as a step (the latest `kept` turns stay)."""
        self._set(plan=[*self._s.plan, step][-kept:])

    def start_step(self, step: PlanStep, now: datetime) -> None:
        step.status = StepStatus.RUNNING
        step.started_at = step.started_at or now
        self._set(current_step=step.index)
        AuditLog(self._s).touch(now)

    def complete_step(self, step: PlanStep, result: str, now: datetime) -> None:
        step.status, step.result, step.finished_at = StepStatus.DONE, preview(result), now
        context = [*self._s.context, f"step {step.index}: {preview(result, 120)}"]
        self._set(current_step=None, context=context[-RECENT_RESULTS_KEPT:])
        AuditLog(self._s).touch(now)

    def count_turn(self, step: PlanStep) -> int:
        step.turns += 1
        return step.turns

    def drop_step(self, step: PlanStep) -> None:
        """A conversation's turn that failed alone: done, and no step in progress."""
        step.status = StepStatus.DONE
        self._set(current_step=None)

    def replace_pending(self, titles: list[str]) -> None:
        """A person's edit: the steps not begun are these."""
        kept = [s for s in self._s.plan if s.status is not StepStatus.PENDING]
        fresh = [PlanStep(index=len(kept) + i, title=t) for i, t in enumerate(titles, start=1)]
        self._set(plan=kept + fresh)

    def replace_context(self, context: list[str]) -> None:
        self._set(context=list(context))

    def forked(self) -> set[int]:
        """The step in progress at the fork's moment starts over; returns its index."""
        restarting = {s.index for s in self._s.plan if s.status is StepStatus.RUNNING}
        for step in self._s.plan:
            if step.index in restarting:
                step.status, step.turns, step.started_at = StepStatus.PENDING, 0, None
        self._set(current_step=None)
        return restarting
