"""The approval gate: the agent's own rules (pure functions, or evaluators run as
activities), then the people a risky call asks (workflows/phases/deciding.py: real people
up to the policy's deadline, or a what-if's recorded decisions); a question to a person
is asked the same way."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
)

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from durable_agents.workflows.activity_io import CallVerdict, EvaluationInput, ToolCall
    from durable_agents.workflows.activity_options import (
        EVALUATE_CALL,
        evaluation,
    )
    from durable_agents.workflows.agent_records import ToolRecord
    from durable_agents.workflows.contract_base import preview
    from durable_agents.workflows.event_kinds import EventKind
    from durable_agents.workflows.records import (
        ApprovalRequest,
        PlanStep,
        Question,
        QuestionStatus,
    )
    from durable_agents.workflows.registry import AgentUnavailable
    from durable_agents.workflows.rules import CallToReview, Evaluator, rule_name, verdict_of
    from durable_agents.workflows.state.audit_log import AuditLog
    from durable_agents.workflows.state.budget_book import BudgetBook
    from durable_agents.workflows.state.outcomes import ToolOutcomes
    from durable_agents.workflows.state.requests import PeopleRequests
    from durable_agents.workflows.state.terms import Terms
    from durable_agents.workflows.state.transcript import Transcript
    from durable_agents.workflows.tools import (
        AskHumanArgs,
        Tool,
    )


from durable_agents.workflows.phases.activity_call import call_activity
from durable_agents.workflows.phases.context import (
    Phase,
    RunContext,
    failure_reason,
)
from durable_agents.workflows.phases.deciding import People


class Gate(Phase):
    """Who may let a tool call run: the agent's rules, then people where they must."""

    def __init__(
        self,
        ctx: RunContext,
        people: People,
        *,
        audit_log: AuditLog,
        book: BudgetBook,
        outcomes: ToolOutcomes,
        requests: PeopleRequests,
        terms: Terms,
        transcript: Transcript,
    ) -> None:
        super().__init__(ctx)
        self.people = people
        self.audit_log, self.book, self.outcomes = audit_log, book, outcomes
        self.requests, self.terms, self.transcript = requests, terms, transcript

    async def rules_verdict(
        self, step: PlanStep, record: ToolRecord, args: BaseModel
    ) -> CallVerdict | None:
        """The agent's own approval rules, in order: the first deny wins; else the first
        ask; approvals change nothing (declared risks and the policy still apply). Each
        verdict goes into the audit log; an evaluator's is in the history too."""
        if not self.ctx.agent.rules:
            return None
        code = {rule_name(rule): rule for rule in self.ctx.agent_code().rules}
        review = CallToReview(
            tool=record.name,
            arguments=args.model_dump(mode="json"),
            risk=record.risk,
            goal=self.terms.goal,
            step=step.index,
            spent_usd=self.book.usage.cost_usd,
            effects_so_far=self.outcomes.effects.total,
        )
        asked: CallVerdict | None = None
        for name in self.ctx.agent.rules:
            rule = code.get(name)
            if rule is None:
                raise AgentUnavailable(
                    f"this worker's agent {self.ctx.agent.name!r} has no approval rule {name!r}, "
                    "which the run recorded; the run waits for a worker that has it"
                )
            verdict = await self._apply_rule(name, rule, review)
            if verdict is None:
                continue
            detail = f"{record.name}: {verdict.decision}: {preview(verdict.reason, 300)}"
            self.audit_log.log(workflow.now(), f"rule {name}", "verdict", detail)
            if verdict.decision == "deny":
                return verdict
            if verdict.decision == "ask" and asked is None:
                asked = verdict
        return asked

    async def _apply_rule(self, name: str, rule: Any, review: CallToReview) -> CallVerdict | None:
        if isinstance(rule, Evaluator):
            asked = EvaluationInput(agent=self.ctx.agent.name, rule=name, call=review.model_dump())
            try:
                return await call_activity(
                    EVALUATE_CALL,
                    asked,
                    result=CallVerdict,
                    summary=f"rule: {name} on {review.tool}",
                    options=evaluation(rule.timeout),
                )
            except ActivityError as err:
                reason = f"the evaluator failed ({failure_reason(err)}); a person decides"
                return CallVerdict(rule=name, decision="ask", reason=preview(reason, 2000))
        try:  # a pure function of the call: deterministic, so replay gets the same answer
            found = rule(review)
            if found is None:
                return None
            verdict_found = verdict_of(found, name)
        except Exception as err:
            reason = f"the rule raised {type(err).__name__}: {err}; a person decides"
            return CallVerdict(rule=name, decision="ask", reason=preview(reason, 2000))
        reason = preview(verdict_found.reason, 2000)
        return CallVerdict(rule=name, decision=verdict_found.decision, reason=reason)

    async def await_approval(
        self, step: PlanStep, call: ToolCall, spec: Tool, args: BaseModel, reason: str, rule: str
    ) -> ApprovalRequest:
        request = ApprovalRequest(
            request_id=call.id,
            tool=spec.name,
            arguments=args.model_dump(mode="json"),
            reason=reason,
            rule=rule,
            step=step.index,
            requested_at=workflow.now(),
            deadline=workflow.now() + self.ctx.decision_timeout,
        )
        self.requests.request_approval(request)
        self.ctx.moment(EventKind.APPROVAL_REQUESTED, f"{spec.name} ({rule})")
        await self.people.wait_for_decision(request)
        self.ctx.publish()
        return request

    async def ask_human(self, step: PlanStep, call: ToolCall, args: AskHumanArgs) -> None:
        question = Question(
            question_id=call.id,
            question=args.question,
            options=args.options,
            step=step.index,
            asked_at=workflow.now(),
            deadline=workflow.now() + self.ctx.decision_timeout,
        )
        self.requests.ask(question)
        self.ctx.moment(EventKind.QUESTION_ASKED, preview(args.question, 80))
        await self.people.wait_for_answer(question)
        self.ctx.publish()
        if question.status is QuestionStatus.ANSWERED:
            text = f"answer from {question.answered_by}: {question.answer}"
        else:
            text = "no answer came before the deadline; decide without it"
        self.transcript.queue_message("tool", text, call.id)
