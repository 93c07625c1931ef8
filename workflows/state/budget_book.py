"""BudgetBook: what the run may spend and what it spent (its own calls and its
sub-agents'), a raise (which approves the budget request waiting), and each delegation
from start to answer."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from durable_agents.workflows.activity_io import TokenUsage
from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import RunBudget, Spend
from durable_agents.workflows.people_inputs import BudgetRaise
from durable_agents.workflows.records import (
    BUDGET_REQUEST,
    DELEGATE_ANSWER_CHARS,
    Delegation,
    Usage,
)
from durable_agents.workflows.state.audit_log import AuditLog
from durable_agents.workflows.state.lifecycle import Lifecycle
from durable_agents.workflows.state.record import Read, Record
from durable_agents.workflows.state.requests import PeopleRequests, latest


class BudgetBook(Record):
    OWNS = frozenset({"usage", "budget", "tool_calls", "last_call", "delegations"})
    budget = Read[RunBudget | None]()
    usage = Read[Usage]()
    delegations = Read[list[Delegation]]()

    @property
    def spent(self) -> Spend:
        """What the run and every sub-agent it delegated to have spent."""
        usage = self._s.usage
        tokens = usage.input_tokens + usage.output_tokens
        total = Spend(usd=usage.cost_usd, tokens=tokens, tool_calls=self._s.tool_calls)
        for delegation in self._s.delegations:
            total = total.plus(delegation.spent)
        return total

    def elapsed(self, now: datetime) -> float:
        return max(0.0, (now - self._s.created_at).total_seconds())

    def set_budget(self, budget: RunBudget | None) -> None:
        self._set(budget=budget)

    def record_usage(self, usage: TokenUsage, *, memoized: bool) -> None:
        self._s.usage.add(usage, memoized=memoized)
        if not memoized:
            tokens = usage.input_tokens + usage.output_tokens
            self._set(last_call=Spend(usd=usage.cost_usd, tokens=tokens))

    def count_tool_call(self) -> None:
        self._set(tool_calls=self._s.tool_calls + 1)

    def budget_error(self, call: str, now: datetime) -> str | None:
        """Why the next call (`model`, `tool` or `delegate`) would pass the budget."""
        budget, spent = self._s.budget, self.spent
        if budget is None:
            return None
        if budget.seconds is not None and self.elapsed(now) >= budget.seconds:
            return f"its time ({budget.seconds:g} s) is up"
        calls = budget.tool_calls
        if call != "model" and calls is not None and spent.tool_calls + 1 > calls:
            return f"{spent.tool_calls} of {calls} tool calls are made"
        if call == "tool":
            return None
        # Spent to the limit: no call. Below it, the model activity estimates whether the
        # call itself would pass it (it knows the request's size).
        if budget.usd is not None and spent.usd >= budget.usd:
            return f"${spent.usd:.4f} of ${budget.usd:.4f} is spent"
        if budget.tokens is not None and spent.tokens >= budget.tokens:
            return f"{spent.tokens} of {budget.tokens} tokens are spent"
        return None

    def call_budget(self) -> dict[str, Any]:
        """What a model call may spend: the rest of the budget (the model activity's check)."""
        budget, spent = self._s.budget, self.spent
        if budget is None or (budget.usd is None and budget.tokens is None):
            return {}
        return {
            "budget_usd": None if budget.usd is None else round(budget.usd - spent.usd, 6),
            "budget_tokens": None if budget.tokens is None else budget.tokens - spent.tokens,
        }

    def budget_figures(self, now: datetime) -> dict[str, Any]:
        """What a person deciding on a budget sees."""
        assert self._s.budget is not None
        return {
            "budget": self._s.budget.model_dump(exclude_none=True),
            "spent": self.spent.model_dump(),
            "seconds": round(self.elapsed(now), 1),
            "next_call": (self._s.last_call or Spend()).model_dump(include={"usd", "tokens"}),
        }

    def remaining_budget(self, now: datetime, child: Delegation) -> RunBudget | None:
        """What a sub-agent may spend: this run's budget less what the run and its other
        sub-agents spent (and, for time, the time that had passed when the child began)."""
        budget, spent = self._s.budget, self.spent
        if budget is None:
            return None
        usd = round(spent.usd - child.spent.usd, 6)
        tokens = spent.tokens - child.spent.tokens
        calls = spent.tool_calls - child.spent.tool_calls
        seconds = self.elapsed(child.started_at or now)
        return RunBudget(
            usd=None if budget.usd is None else max(0.0, round(budget.usd - usd, 6)),
            tokens=None if budget.tokens is None else max(0, budget.tokens - tokens),
            tool_calls=None if budget.tool_calls is None else max(0, budget.tool_calls - calls),
            seconds=None if budget.seconds is None else max(0.001, budget.seconds - seconds),
        )

    def budget_raise_error(self, raise_: BudgetRaise, now: datetime) -> str | None:
        if self._s.status.is_closed:
            return f"the run is {self._s.status.value}"
        limits = raise_.limits()
        if not limits:
            return "give a new limit: usd, tokens, tool_calls or seconds"
        if not self._s.policy.may_decide(BUDGET_REQUEST, raise_.by):
            return f"{raise_.by} may not change this run's budget"
        below = self.spent.model_dump() | {"seconds": self.elapsed(now)}
        for name, value in limits.items():
            if value < below[name]:
                return f"{name} {value:g} is below what is spent already ({below[name]:g})"
        return None

    def raise_budget(self, raise_: BudgetRaise, now: datetime) -> RunBudget:
        """Apply a raise that budget_raise_error() accepted; a budget request waiting is
        approved by it (the run checks again, and asks again if still over)."""
        base = self._s.budget.model_dump() if self._s.budget else {}
        budget = RunBudget.model_validate(base | raise_.limits())
        self._set(budget=budget)
        detail = json.dumps(raise_.limits(), sort_keys=True)
        comment = raise_.comment or f"budget raised: {detail}"
        PeopleRequests(self._s).approve_budget_requests(raise_.by, comment, now)
        Lifecycle(self._s).leave_wait()
        AuditLog(self._s).log(now, raise_.by, "budget_raised", detail)
        return budget

    def delegation(self, child_id: str) -> Delegation | None:
        return next((d for d in self._s.delegations if d.child_id == child_id), None)

    def reusable_delegation(self, agent: str, step: int, task: str) -> Delegation | None:
        """A finished delegation of the run this one was forked from, for the same task."""
        wanted = (agent, step, preview(task, 500))
        return next(
            (
                d
                for d in self._s.delegations
                if d.inherited and d.status == "completed" and (d.agent, d.step, d.task) == wanted
            ),
            None,
        )

    def start_delegation(self, delegation: Delegation, now: datetime) -> None:
        self._s.delegations.append(delegation)
        self.count_tool_call()
        detail = f"{delegation.agent}: {delegation.child_id}"
        AuditLog(self._s).log(now, "model", "delegated", detail)

    def child_spent(self, child_id: str, spent: Spend, token: str | None = None) -> bool:
        """A running child reports its spend (after each call); False if unknown. Where
        the child's spend is read from its own run (`spend_read`), the report is only a
        nudge to read it: what it says is never taken, whoever sent it. Else (runs from
        before that) taken when it carries the token the child was given."""
        delegation = self._running(child_id)
        if delegation is None:
            return False
        if delegation.spend_read:
            delegation.spend_reported = True
            return True
        if delegation.report_token is not None and token != delegation.report_token:
            return False
        return self._spend_grows(delegation, spent)

    def reading_spend(self, delegation: Delegation) -> None:
        """The child's spend is being read: reports from now on ask for another read."""
        delegation.spend_reported = False

    def child_spend_read(self, child_id: str, spent: Spend) -> bool:
        """A running child's spend, as its own run answered (Delegating reads it)."""
        delegation = self._running(child_id)
        return delegation is not None and self._spend_grows(delegation, spent)

    def _running(self, child_id: str) -> Delegation | None:
        delegation = self.delegation(child_id)
        return delegation if delegation is not None and delegation.status == "running" else None

    @staticmethod
    def _spend_grows(delegation: Delegation, spent: Spend) -> bool:
        """Spend only grows: an older report or read changes nothing."""
        known = delegation.spent
        if spent.usd < known.usd or spent.tokens < known.tokens:
            return False
        if spent.tool_calls < known.tool_calls:
            return False
        delegation.spent = spent
        return True

    def finish_delegation(
        self, child_id: str, status: str, answer: str | None, spent: Spend | None, now: datetime
    ) -> None:
        delegation = self.delegation(child_id)
        assert delegation is not None
        delegation.status, delegation.spend_reported = status, False
        delegation.answer = preview(answer, DELEGATE_ANSWER_CHARS) if answer else None
        if spent is not None:
            delegation.spent = spent
        AuditLog(self._s).log(now, "system", "delegate_answered", f"{child_id}: {status}")

    def forked(self) -> None:
        """In a fork: a sub-agent's finished answer is reused for the same task; one still
        running belonged to the parent's moment and is not the fork's."""
        kept = [d for d in self._s.delegations if d.status != "running"]
        self._set(delegations=[d.model_copy(update={"inherited": True}) for d in kept])

    def trim(self, kept: int) -> None:
        """The latest `kept` finished delegations, and every one still running."""
        self._set(delegations=latest(self._s.delegations, kept, lambda d: d.status == "running"))
