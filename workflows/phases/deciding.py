"""Who decides what a run asks of a person: an approval of a tool call, an answer to a
question, more budget. One interface, two ways:

- `WaitingForPeople`: real people, each request waiting up to the policy's deadline
  (escalated once where the policy says so); no decision in time is a rejection by the
  deadline, and a question with no answer expires.
- `RecordedDecisions`: a what-if run (workflows/whatif.py) waits for nobody; it takes the
  recorded run's decision on the same call, else what the what-if's policy says.

The gate and the budget ask, and read the request once it returns decided; the workflow
chooses the way when it wires the run (workflows/agent.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows.contract_base import preview
    from durable_agents.workflows.event_kinds import EventKind
    from durable_agents.workflows.people_inputs import Answer, DecideRequest
    from durable_agents.workflows.records import (
        ApprovalRequest,
        ApprovalStatus,
        Question,
        QuestionStatus,
    )
    from durable_agents.workflows.state.origin import Origin
    from durable_agents.workflows.state.requests import PeopleRequests
    from durable_agents.workflows.state.terms import Terms
    from durable_agents.workflows.whatif import (
        POLICY_ACTOR,
        WHATIF_ACTOR,
        ShadowSpec,
        recorded_actor,
    )

from durable_agents.workflows.phases.context import DEADLINE_ACTOR, Phase, RunContext, RunFailed


class People(Protocol):
    """Each method returns once the request or question is no longer pending."""

    async def wait_for_decision(self, request: ApprovalRequest) -> None: ...

    async def wait_for_answer(self, question: Question) -> None: ...

    async def wait_for_budget(self, request: ApprovalRequest) -> None: ...


class WaitingForPeople(Phase):
    """Real people: a durable wait, up to the policy's deadline."""

    def __init__(self, ctx: RunContext, *, requests: PeopleRequests, terms: Terms) -> None:
        super().__init__(ctx)
        self.requests, self.terms = requests, terms

    async def wait_for_decision(self, request: ApprovalRequest) -> None:
        def decided() -> bool:
            return request.status is not ApprovalStatus.PENDING

        what = f"{request.request_id} (approve {request.tool})"
        if not await self._wait(decided, what) and self.terms.policy.on_timeout == "escalate":
            later = workflow.now() + self.ctx.decision_timeout
            self.requests.escalate(request, later, workflow.now())
            self.ctx.moment(EventKind.APPROVAL_ESCALATED, request.tool)
            await self._wait(decided, f"{request.request_id} (approve {request.tool}, escalated)")
        if not decided():
            self._rejected_late(request, "no decision in time")
            self.ctx.moment(EventKind.DEADLINE_PASSED, f"{request.tool} rejected")

    async def wait_for_answer(self, question: Question) -> None:
        asked = f"{question.question_id} (answer a question)"
        if not await self._wait(lambda: question.status is not QuestionStatus.PENDING, asked):
            self.requests.expire(question, workflow.now())
            self.ctx.moment(EventKind.DEADLINE_PASSED, "question expired")

    async def wait_for_budget(self, request: ApprovalRequest) -> None:
        decided = await self._wait(
            lambda: request.status is not ApprovalStatus.PENDING,
            f"{request.request_id} (raise the budget)",
        )
        # Published as the wait ended, before a late rejection (what runs recorded).
        self.ctx.publish()
        if not decided:
            self._rejected_late(request, "no raise in time")

    async def _wait(self, done: Callable[[], bool], what: str) -> bool:
        """Wait for a person, durably, up to the run's decision timeout. The deadline's
        timer is named for `what` is awaited (the Web UI shows "waiting for a person:
        call_…", not an unnamed timer); a timer's summary is metadata, which replay does
        not compare, so recorded runs replay as before."""
        if self.ctx.cancel_holds():
            raise asyncio.CancelledError()
        try:
            await workflow.wait_condition(
                done,
                timeout=self.ctx.decision_timeout,
                timeout_summary=preview(f"waiting for a person: {what}", 200),
            )
        except TimeoutError:
            return False
        return True

    def _rejected_late(self, request: ApprovalRequest, comment: str) -> None:
        """No decision before the deadline: rejected by it."""
        late = DecideRequest(
            request_id=request.request_id, approve=False, by=DEADLINE_ACTOR, comment=comment
        )
        self.requests.apply_decision(late, workflow.now())


class RecordedDecisions(Phase):
    """A what-if run: the recorded run's decisions and answers, taken in order."""

    def __init__(self, ctx: RunContext, *, origin: Origin, requests: PeopleRequests) -> None:
        super().__init__(ctx)
        self.origin, self.requests = origin, requests

    async def wait_for_decision(self, request: ApprovalRequest) -> None:
        shadow = self._shadow()
        found = self.origin.take_recorded_decision(request.tool, request.arguments)
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
        decision = DecideRequest(
            request_id=request.request_id, approve=approved, by=by, comment=comment
        )
        self.requests.apply_decision(decision, workflow.now())
        self.ctx.moment(
            EventKind.APPROVED if approved else EventKind.REJECTED, f"{request.tool} by {by}"
        )

    async def wait_for_answer(self, question: Question) -> None:
        """The recorded answer to the same question, else none (the model hears that no
        answer came), or the what-if stops."""
        shadow = self._shadow()
        found = self.origin.take_recorded_answer(question.question)
        if found is None and shadow.unmatched == "stop":
            raise RunFailed(
                "what-if stopped: the model asked a question the recorded run never did"
            )
        if found is not None and found.answer is not None:
            by = recorded_actor(found.by or "?")
            answer = Answer(question_id=question.question_id, answer=found.answer, by=by)
            self.requests.answer(answer, workflow.now())
        else:
            self.requests.expire(question, workflow.now())

    async def wait_for_budget(self, request: ApprovalRequest) -> None:
        """A what-if raises no budget: it stops there (publishing nothing until it ends)."""
        refused = DecideRequest(
            request_id=request.request_id, approve=False, by=WHATIF_ACTOR, comment="no raise"
        )
        self.requests.apply_decision(refused, workflow.now())

    def _shadow(self) -> ShadowSpec:
        shadow = self.origin.shadow
        assert shadow is not None, "recorded decisions are a what-if run's"
        return shadow
