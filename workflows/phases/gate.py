"""The approval gate: the agent's own rules (pure functions, or evaluators run as
activities) and the person a risky call waits for, up to the policy's deadline; a
question to a person waits the same way."""

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
    from durable_agents.workflows.people_inputs import Answer, Decision
    from durable_agents.workflows.records import (
        ApprovalRequest,
        ApprovalStatus,
        PlanStep,
        Question,
        QuestionStatus,
    )
    from durable_agents.workflows.registry import AgentUnavailable
    from durable_agents.workflows.rules import CallToReview, Evaluator, rule_name, verdict_of
    from durable_agents.workflows.tools import (
        AskHumanArgs,
        Tool,
    )
    from durable_agents.workflows.whatif import POLICY_ACTOR, recorded_actor


from durable_agents.workflows.phases.context import (
    DEADLINE_ACTOR,
    Phase,
    RunFailed,
    failure_reason,
    is_cancellation,
)


class Gate(Phase):
    """Who may let a tool call run: the agent's rules, then a person where one must."""

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
            goal=self.state.goal,
            step=step.index,
            spent_usd=self.state.usage.cost_usd,
            effects_so_far=self.state.effects.total,
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
            self.state.log(workflow.now(), f"rule {name}", "verdict", detail)
            if verdict.decision == "deny":
                return verdict
            if verdict.decision == "ask" and asked is None:
                asked = verdict
        return asked

    async def _apply_rule(self, name: str, rule: Any, review: CallToReview) -> CallVerdict | None:
        if isinstance(rule, Evaluator):
            try:
                verdict: CallVerdict = await workflow.execute_activity(
                    EVALUATE_CALL,
                    EvaluationInput(agent=self.ctx.agent.name, rule=name, call=review.model_dump()),
                    result_type=CallVerdict,
                    summary=f"rule: {name} on {review.tool}",
                    **evaluation(rule.timeout).kwargs(),
                )
                return verdict
            except ActivityError as err:
                if is_cancellation(err):
                    raise
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
        self.state.request_approval(request)
        self.ctx.moment("approval requested", f"{spec.name} ({rule})")
        if self.state.shadow is not None:
            self._decide_as_recorded(request)
            self.ctx.publish()
            return request

        def decided() -> bool:
            return request.status is not ApprovalStatus.PENDING

        if not await self.ctx.wait(decided) and self.state.policy.on_timeout == "escalate":
            self.state.escalate(request, workflow.now() + self.ctx.decision_timeout, workflow.now())
            self.ctx.moment("approval escalated", spec.name)
            await self.ctx.wait(decided)
        if not decided():
            late = Decision(
                request_id=request.request_id, by=DEADLINE_ACTOR, comment="no decision in time"
            )
            self.state.decide(late, False, workflow.now())
            self.ctx.moment("deadline passed", f"{spec.name} rejected")
        self.ctx.publish()
        return request

    def _decide_as_recorded(self, request: ApprovalRequest) -> None:
        """A what-if shadow waits for nobody: the recorded run's decision on the same call,
        else the what-if's policy (workflows/whatif.py)."""
        shadow = self.state.shadow
        assert shadow is not None
        found = shadow.take_decision(request.tool, request.arguments)
        if found is not None:
            by, comment, approved = recorded_actor(found.by), found.comment, found.approved
        elif shadow.unmatched == "stop":
            raise RunFailed(
                f"what-if stopped: {request.tool} asked for an approval the recorded run "
                "never asked for"
            )
        else:
            by, comment = POLICY_ACTOR, "not asked in the recorded run"
            approved = shadow.unmatched == "approve"
        decision = Decision(request_id=request.request_id, by=by, comment=comment)
        self.state.decide(decision, approved, workflow.now())
        self.ctx.moment("approved" if approved else "rejected", f"{request.tool} by {by}")

    def _answer_as_recorded(self, question: Question) -> None:
        """A shadow's question: the recorded run's answer to the same question, else none
        (the model hears that no answer came), or the shadow stops."""
        shadow = self.state.shadow
        assert shadow is not None
        found = shadow.take_answer(question.question)
        if found is None and shadow.unmatched == "stop":
            raise RunFailed(
                "what-if stopped: the model asked a question the recorded run never did"
            )
        if found is not None and found.answer is not None:
            by = recorded_actor(found.by or "?")
            answer = Answer(question_id=question.question_id, answer=found.answer, by=by)
            self.state.answer(answer, workflow.now())
        else:
            self.state.expire(question, workflow.now())

    async def ask_human(self, step: PlanStep, call: ToolCall, args: AskHumanArgs) -> None:
        question = Question(
            question_id=call.id,
            question=args.question,
            options=args.options,
            step=step.index,
            asked_at=workflow.now(),
            deadline=workflow.now() + self.ctx.decision_timeout,
        )
        self.state.ask(question)
        self.ctx.moment("question asked", preview(args.question, 80))
        if self.state.shadow is not None:
            self._answer_as_recorded(question)
        elif not await self.ctx.wait(lambda: question.status is not QuestionStatus.PENDING):
            self.state.expire(question, workflow.now())
            self.ctx.moment("deadline passed", "question expired")
        self.ctx.publish()
        if question.status is QuestionStatus.ANSWERED:
            text = f"answer from {question.answered_by}: {question.answer}"
        else:
            text = "no answer came before the deadline; decide without it"
        self.state.queue_message("tool", text, call.id)
