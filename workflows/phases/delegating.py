"""Delegation: a sub-agent's run as a child workflow with an id made of durable parts, so
a retried task, a crash or a reset never starts it twice; its answer goes to the model.
While it runs, its spend is read from its own run each time it reports (never taken from
the report), and when it ends from its result."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import (
    ActivityError,
    CancelledError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows import faults, patches, prompts, signed_changes
    from durable_agents.workflows.activity_io import ToolCall
    from durable_agents.workflows.activity_options import (
        AWAIT_RUN,
        CHILD_SPEND,
    )
    from durable_agents.workflows.agents import (
        DelegateArgs,
    )
    from durable_agents.workflows.contract_base import preview
    from durable_agents.workflows.contracts import (
        DelegatedBy,
        RunPolicy,
        RunRequest,
        RunResult,
        Spend,
    )
    from durable_agents.workflows.delegation import child_run_id
    from durable_agents.workflows.event_kinds import EventKind
    from durable_agents.workflows.policy import narrowed, policy_floor
    from durable_agents.workflows.records import Delegation, PlanStep
    from durable_agents.workflows.state.budget_book import BudgetBook
    from durable_agents.workflows.state.origin import Origin
    from durable_agents.workflows.state.outcomes import ToolOutcomes
    from durable_agents.workflows.state.terms import Terms
    from durable_agents.workflows.state.thread import Thread
    from durable_agents.workflows.tools import (
        Tool,
    )


from durable_agents.workflows.phases.activity_call import call_activity
from durable_agents.workflows.phases.context import Phase, RunContext, failure_reason


class Delegating(Phase):
    """A sub-agent's run for a task the model handed it."""

    def __init__(
        self,
        ctx: RunContext,
        *,
        book: BudgetBook,
        origin: Origin,
        outcomes: ToolOutcomes,
        terms: Terms,
        thread: Thread,
    ) -> None:
        super().__init__(ctx)
        self.book, self.origin, self.outcomes = book, origin, outcomes
        self.terms, self.thread = terms, thread

    async def delegate(
        self, step: PlanStep, call: ToolCall, spec: Tool, args: DelegateArgs
    ) -> None:
        """Run the sub-agent on the task as a child workflow and hand its answer to the model.
        A fork made after this delegation reuses its answer for the same task."""
        agent = spec.delegate_to or ""
        reused = self.book.reusable_delegation(agent, step.index, args.task)
        if reused is not None:
            self.ctx.moment(EventKind.DELEGATE_ANSWER_REUSED, f"{agent}: {reused.child_id}")
            self._delegate_answered(step, call, spec, reused.child_id, "completed", reused.answer)
            return
        now = workflow.now()
        call_key = self.thread.call_key(call.id)
        child_id = child_run_id(self.origin.run_id, self.origin.store_key, step.index, call_key)
        reads_spend = workflow.patched(patches.CHILD_SPEND_READ)
        delegation = Delegation(
            child_id=child_id,
            agent=agent,
            tool=spec.name,
            step=step.index,
            tool_call_id=call.id,
            task=preview(args.task, 500),
            started_at=now,
            # A token is written to the child's start input, which anyone who may read
            # the namespace can read: only runs from before CHILD_SPEND_READ have one.
            report_token=None if reads_spend else str(workflow.uuid4()),
            spend_read=reads_spend,
        )
        self.book.start_delegation(delegation, now)
        self.ctx.moment(EventKind.DELEGATED, f"{agent}: {child_id}")
        memory = self.ctx.agent.memory
        shared = memory is not None and memory.shared_with_sub_agents
        request = RunRequest(
            goal=args.task,
            agent=agent,
            label=self.terms.label,
            subject=self.terms.subject,
            subject_grant=self.terms.subject_grant,
            memory_namespace=self.terms.memory_namespace if shared else None,
            policy=self._handed_policy(agent),
            budget=self.book.remaining_budget(now, delegation),
            delegated_by=DelegatedBy(
                run_id=self.origin.run_id,
                step=step.index,
                tool_call_id=call.id,
                agent=self.ctx.agent.name,
                identities=[*signed_changes.runs_above(self.origin), self.origin.store_key][-20:],
                report_token=delegation.report_token,
            ),
            shadow=self.origin.child_shadow(spec.name, delegation.task),
        )
        self.ctx.active_child = child_id
        reading = asyncio.create_task(self._read_spend(child_id)) if reads_spend else None
        try:
            result = await self._child_result(child_id, request)
        except ChildWorkflowError as err:
            if isinstance(err.cause, CancelledError):
                result = RunResult(run_id=child_id, status="cancelled")
            else:
                result = RunResult(run_id=child_id, status="failed", error=failure_reason(err))
        finally:
            self.ctx.active_child = None
            if reading is not None:
                reading.cancel()
        faults.reached("after_child_answer", child_id)
        answer = result.final_answer if result.status == "completed" else result.error
        self.book.finish_delegation(child_id, result.status, answer, result.spent, workflow.now())
        self.ctx.moment(EventKind.DELEGATE_ANSWERED, f"{agent}: {result.status}")
        self._delegate_answered(step, call, spec, child_id, result.status, answer)
        self.ctx.report_spend()

    def _handed_policy(self, agent: str) -> RunPolicy:
        """This run's policy narrowed to the sub-agent's own floor (as this worker has its
        agent): the child refuses anything looser than its floor, and keeps ours."""
        declared = self.ctx.registry().agent(agent).adopted()
        return narrowed(policy_floor(declared.policy, declared.tool_approvers), self.terms.policy)

    async def _read_spend(self, child_id: str) -> None:
        """Each time the running child reports, read its spend from its own run; reports
        that come while a read is under way are answered by one read after it. Cancelled
        when the child's result comes (which holds its spend)."""
        while True:
            await workflow.wait_condition(lambda: self._reported(child_id))
            delegation = self.book.delegation(child_id)
            assert delegation is not None
            self.book.reading_spend(delegation)
            try:
                spent = await call_activity(
                    CHILD_SPEND, child_id, result=Spend, summary=f"spend of {child_id}", local=True
                )
            except ActivityError as err:
                workflow.logger.warning("spend of %s not read: %s", child_id, failure_reason(err))
                continue
            self.book.child_spend_read(child_id, spent)

    def _reported(self, child_id: str) -> bool:
        delegation = self.book.delegation(child_id)
        return delegation is not None and delegation.spend_reported

    async def _child_result(self, child_id: str, request: RunRequest) -> RunResult:
        faults.reached("before_child_start", child_id)
        try:
            handle = await workflow.start_child_workflow(
                "AgentWorkflow",
                request,
                id=child_id,
                task_queue=workflow.info().task_queue,
                result_type=RunResult,
                # A closed child of this id is this delegation's (a reset replays the start):
                # never a second run of it.
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                # A reset ends the parent's run: its children must live on to be found.
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                static_summary=f"sub-agent {request.agent} for {self.origin.run_id}",
            )
        except WorkflowAlreadyStartedError:
            return await self._await_started_child(child_id)
        faults.reached("after_child_start", child_id)
        result: RunResult = await handle
        if result.run_id != child_id:
            # A result sealed for another run, copied in by whoever completed this one.
            why = f"the sub-agent's result names run {preview(result.run_id, 80)}"
            return RunResult(run_id=child_id, status="failed", error=why)
        return result

    async def _await_started_child(self, child_id: str) -> RunResult:
        """The child's run already exists (the parent was reset to before its start): wait
        for its answer in an activity; cancelling the parent cancels it too."""
        summary = f"wait for sub-agent {child_id}"
        try:
            return await call_activity(AWAIT_RUN, child_id, result=RunResult, summary=summary)
        except asyncio.CancelledError:
            # This run was cancelled while it waited: the child it waits on goes too.
            await workflow.get_external_workflow_handle(child_id).cancel()
            raise
        except ActivityError as err:
            return RunResult(run_id=child_id, status="failed", error=failure_reason(err))

    def _delegate_answered(
        self,
        step: PlanStep,
        call: ToolCall,
        spec: Tool,
        child_id: str,
        status: str,
        answer: str | None,
    ) -> None:
        text = prompts.delegate_result(spec.delegate_to or "", status, answer)
        ok = status == "completed"
        self.outcomes.tell(step.index, call.id, spec.name, ok=ok, text=text, now=workflow.now())
