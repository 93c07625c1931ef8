"""The budget of a run and its sub-agents' tree: a spent budget does not fail the run, it
waits for a person (an approval named `(budget)`) to raise it or stop the run; a raise is
shared with the sub-agent at work, as the person signed it."""

from __future__ import annotations

import asyncio

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows.contracts import RunBudget
    from durable_agents.workflows.people_inputs import Actor, BudgetRaise, Decision
    from durable_agents.workflows.records import BUDGET_REQUEST, ApprovalRequest, ApprovalStatus


from durable_agents.workflows.phases.context import DEADLINE_ACTOR, Phase


class Budget(Phase):
    """The run's budget: checked before each call; a spent one waits for a person."""

    async def within(self, call: str) -> None:
        while (reason := self.state.budget_error(call, workflow.now())) is not None:
            await self.ask_for_more(call, reason)

    async def ask_for_more(self, call: str, reason: str) -> None:
        """Wait for a person to raise the budget (the run checks again) or to reject the
        request, which stops the run; no answer by the deadline stops it too."""
        request = ApprovalRequest(
            request_id=f"budget-{self.state.moment + 1}",
            tool=BUDGET_REQUEST,
            arguments=self.state.budget_figures(workflow.now()),
            reason=f"the next {call} call would pass the budget: {reason}",
            rule=f"budget: {reason}; raise it or stop the run",
            step=self.state.current_step or 0,
            requested_at=workflow.now(),
            deadline=workflow.now() + self.ctx.decision_timeout,
        )
        self.state.request_approval(request)
        self.ctx.moment("budget reached", reason)
        if self.state.shadow is not None:  # a what-if shadow raises no budget: it stops
            refused = Decision(request_id=request.request_id, by="what-if", comment="no raise")
            self.state.decide(refused, False, workflow.now())
            self.state.request_cancel(
                Actor(by="what-if", reason=f"stopped at its budget: {reason}"), workflow.now()
            )
            raise asyncio.CancelledError()
        decided = await self.ctx.wait(lambda: request.status is not ApprovalStatus.PENDING)
        self.ctx.publish()
        if decided and request.status is ApprovalStatus.APPROVED:
            return
        by = request.decided_by or DEADLINE_ACTOR
        if not decided:
            late = Decision(request_id=request.request_id, by=by, comment="no raise in time")
            self.state.decide(late, False, workflow.now())
        stop = Actor(by=by, reason=f"stopped at its budget: {reason}")
        self.state.request_cancel(stop, workflow.now())
        raise asyncio.CancelledError()

    def raise_error(self, raise_: BudgetRaise) -> str | None:
        if raise_.forwarded is not None:
            return "a forwarded raise comes from a parent run, as its `budget` signal"
        return self.state.budget_raise_error(raise_, workflow.now())

    def apply_raise(self, raise_: BudgetRaise) -> RunBudget:
        budget = self.state.raise_budget(raise_, workflow.now())
        self.ctx.moment("budget raised", raise_.by)
        running = next((d for d in self.state.delegations if d.status == "running"), None)
        child_budget = (
            self.state.remaining_budget(workflow.now(), running) if running is not None else None
        )
        if child_budget is not None:  # the sub-agent at work gets its share of the raise
            limits = child_budget.model_dump(exclude_none=True)
            # The raise as the person signed it goes along: the child checks it too.
            original = (raise_.forwarded or raise_).model_copy(update={"forwarded": None})
            forwarded = BudgetRaise(
                by=raise_.by, comment="raised by the parent", forwarded=original, **limits
            )
            self.ctx.forward("budget", forwarded)
        return budget
