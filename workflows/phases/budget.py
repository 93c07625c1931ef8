"""The budget of a run and its sub-agents' tree: a spent budget does not fail the run, it
asks people (a budget request) to raise it or stop the run; a raise is shared with the
sub-agent at work, as the person signed it."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows.contracts import RunBudget
    from durable_agents.workflows.event_kinds import EventKind
    from durable_agents.workflows.people_inputs import Actor, BudgetRaise
    from durable_agents.workflows.records import ApprovalRequest, ApprovalStatus
    from durable_agents.workflows.state.budget_book import BudgetBook
    from durable_agents.workflows.state.lifecycle import Lifecycle
    from durable_agents.workflows.state.moments import Moments
    from durable_agents.workflows.state.requests import PeopleRequests
    from durable_agents.workflows.state.steps import Steps


from durable_agents.workflows.phases.context import Phase, RunContext, RunStopped
from durable_agents.workflows.phases.deciding import People


class Budget(Phase):
    """The run's budget: checked before each call; a spent one waits for people."""

    def __init__(
        self,
        ctx: RunContext,
        people: People,
        *,
        book: BudgetBook,
        lifecycle: Lifecycle,
        moments: Moments,
        requests: PeopleRequests,
        steps: Steps,
    ) -> None:
        super().__init__(ctx)
        self.people = people
        self.book, self.lifecycle, self.moments = book, lifecycle, moments
        self.requests, self.steps = requests, steps

    async def within(self, call: str) -> None:
        while (reason := self.book.budget_error(call, workflow.now())) is not None:
            await self.ask_for_more(call, reason)

    async def ask_for_more(self, call: str, reason: str) -> None:
        """Ask people to raise the budget (the run checks again); a rejection, or no
        raise by the deadline, stops the run there."""
        now = workflow.now()
        request = ApprovalRequest.for_budget(
            request_id=f"budget-{self.moments.moment + 1}",
            call=call,
            reason=reason,
            figures=self.book.budget_figures(now),
            step=self.steps.current_step or 0,
            now=now,
            deadline=now + self.ctx.decision_timeout,
        )
        self.requests.request_approval(request)
        self.ctx.moment(EventKind.BUDGET_REACHED, reason)
        await self.people.wait_for_budget(request)
        if request.status is ApprovalStatus.APPROVED:
            return
        stop = Actor(by=request.decided_by or "?", reason=f"stopped at its budget: {reason}")
        self.lifecycle.request_cancel(stop, workflow.now())
        raise RunStopped(stop)

    def raise_error(self, raise_: BudgetRaise) -> str | None:
        if raise_.forwarded is not None:
            return "a forwarded raise comes from a parent run, as its `budget` signal"
        return self.book.budget_raise_error(raise_, workflow.now())

    def apply_raise(self, raise_: BudgetRaise) -> RunBudget:
        budget = self.book.raise_budget(raise_, workflow.now())
        self.ctx.moment(EventKind.BUDGET_RAISED, raise_.by)
        running = next((d for d in self.book.delegations if d.status == "running"), None)
        child_budget = (
            self.book.remaining_budget(workflow.now(), running) if running is not None else None
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
