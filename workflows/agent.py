"""The agent workflow: plan, then for each step model turns, gate, tool, record.

Deterministic code only. Every side effect (the model, each tool) is an activity,
called by name so this module imports nothing that does I/O. Handlers for people
(approve, reject, decide, answer, pause, resume, cancel, edit) sit below the story;
each changes the state through one method of the state model.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any, NoReturn, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeUpdate, WorkflowIDReusePolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from workflows import faults, prompts, signed_changes, timeline
    from workflows import search_attributes as sa
    from workflows.agents import (
        BEFORE_AGENTS,
        AdoptedAgent,
        Agent,
        AgentRecord,
        AgentRegistry,
        AgentUnavailable,
        CallToReview,
        DelegateArgs,
        Evaluator,
        MCPListing,
        MCPListRequest,
        ToolRecord,
        rule_name,
        served,
        verdict_of,
    )
    from workflows.contracts import (
        CUT_SHORT_REASONS,
        PREVIEW_CHARS,
        Actor,
        Answer,
        BudgetRaise,
        CallVerdict,
        ChildSpend,
        DecideRequest,
        Decision,
        DelegatedBy,
        EffectSummary,
        EvaluationInput,
        ForkSpec,
        ModelCallInput,
        ModelTurn,
        ParentFacts,
        RewindRequest,
        RunBudget,
        RunRequest,
        RunResult,
        SignedDecision,
        StatePatch,
        ToolCall,
        ToolCallInput,
        ToolOutcome,
        TranscriptCopy,
        preview,
    )
    from workflows.delegation import child_run_id
    from workflows.policy import approval_rule, idempotency_key
    from workflows.signing import Action
    from workflows.state import (
        BUDGET_REQUEST,
        FINAL_ANSWER_CHARS,
        IDENTITY_SEPARATOR,
        ApprovalRequest,
        ApprovalStatus,
        Delegation,
        EventPage,
        PlanStep,
        Question,
        QuestionStatus,
        RunState,
        RunSummary,
        ToolResultRecord,
        pack_state,
        unpack_state,
        workflow_id_of,
    )
    from workflows.tools import (
        ASK_HUMAN,
        COMPLETE_STEP,
        INTERNAL_TOOLS,
        SUBMIT_PLAN,
        AskHumanArgs,
        CompleteStepArgs,
        SubmitPlanArgs,
        Tool,
        ToolRisk,
    )

CALL_MODEL = "call_model"
RUN_TOOL = "run_tool"
EVALUATE_CALL = "evaluate_call"
RESOLVE_AGENT = "resolve_agent"
COPY_TRANSCRIPT = "copy_transcript"
LIST_MCP_TOOLS = "list_mcp_tools"
CALL_MCP_TOOL = "call_mcp_tool"
# Waits for a sub-agent's run that a reset of its parent found already started.
AWAIT_RUN = "await_run"
# Asks a fork's parent for its identity and policy.
FORK_ORIGIN = "fork_origin"
CHILD_SPENT = "child_spent"
# Activities heartbeat every second (activities/heartbeat.py): a dead worker's activity
# is retried after a few seconds, not after its whole start-to-close timeout.
HEARTBEAT_TIMEOUT = timedelta(seconds=5)
DEADLINE_ACTOR = "deadline"
# Runs started from this version on keep their stored data under the chain's identity
# (workflow id + first execution's run id); older runs in flight keep their workflow id.
RUN_IDENTITY_PATCH = "run-identity"
# A reply cut short no longer ends a step or the final answer (asked only where one came).
CUT_SHORT_PATCH = "cut-short-replies-go-on"
# A tool that fails after its retries no longer fails the run: the model hears the error.
TOOL_ERRORS_PATCH = "tool-errors-go-to-the-model"
# Runs record their agent at start (a local activity); older runs resolve it when needed.
AGENT_RECORD_PATCH = "agent-recorded-at-start"
# A cancel now always takes hold: one that came before the run's story started (with the
# start, or during its local activity) or while an activity that finished anyway was in
# flight was recorded and then lost, the run going on to its next wait.
CANCEL_HOLDS_PATCH = "cancel-holds"
# The step number is upserted only with a change of status or of what the run waits for:
# an upsert is a billable action, and one every step cost a step one action more than raw
# Temporal's. The live step is in the current details (the Web UI) and the queries.
STEP_WITH_STATUS_PATCH = "step-published-with-status"
# Under `require_signed_decisions`, every change a person makes (a budget, an edit, pause,
# resume, cancel, rewind) counts only when signed, and a decision's signature covers its
# tool, step and comment (workflows/signing.py, v2); older runs keep v1 on replay.
EVERY_CHANGE_SIGNED_PATCH = "every-change-signed"
# A fork takes its parent's identity and policy from the parent itself (`fork_origin`),
# not from the state the fork request carries.
FORK_CHECKED_PATCH = "fork-checked-with-its-parent"
PLAN_TOOLS: tuple[str, ...] = (SUBMIT_PLAN,)


class RunFailed(Exception):
    """A rule of the run was broken (no plan, a step that never ends): the run fails."""


# Pinned on a versioned worker (its default behaviour, runtime/versioning.py): a run lives
# on the build that started it; only `agentctl release move`, after replaying its history
# on the new build, moves it.
@workflow.defn(name="AgentWorkflow")
class AgentWorkflow:
    @workflow.init
    def __init__(self, request: RunRequest) -> None:
        self._fork_error: str | None = None
        self._parent_store_key: str | None = None
        if request.resumes:
            # Our own state, carried over a continue-as-new: the chain goes on.
            if request.resume_state_packed is not None:
                self.state = unpack_state(request.resume_state_packed)
            else:
                self.state = RunState.model_validate(request.resume_state)
            self.state.chain += 1
        else:
            self.state = RunState.start(workflow.info().workflow_id, request, workflow.now())
            if request.fork is not None:
                self._start_as_fork(request.fork)
        self._published: tuple[str, int, str] | None = None
        self._signatures_settled = False  # EVERY_CHANGE_SIGNED_PATCH, asked once
        self._step_with_status: bool | None = None  # STEP_WITH_STATUS_PATCH, asked once
        self._story: asyncio.Task[str] | None = None
        # The sub-agent's run this run waits on now (pause, resume, cancel, budget reach it).
        self._active_child: str | None = None
        self._sending: set[asyncio.Task[None]] = set()

    # -- the run's agent: resolved once, recorded, then served from this worker's code ----
    def _registry(self) -> AgentRegistry:
        return served(workflow.info().task_queue)

    async def _adopt_agent(self, request: RunRequest) -> None:
        """Record the agent this run may use, through a local activity so the record is in
        the history (a replay on changed code reads it back); its defaults fill what the
        request left out. A worker without the agent fails the task here, not the run."""
        name = request.agent or BEFORE_AGENTS
        self._registry().agent(name)
        adopted: AdoptedAgent = await workflow.execute_local_activity(
            RESOLVE_AGENT,
            name,
            result_type=AdoptedAgent,
            start_to_close_timeout=timedelta(seconds=10),
            summary=f"agent: {name}",
        )
        self.state.agent = adopted.record
        if request.limits is None and adopted.limits is not None:
            self.state.limits = adopted.limits
        if request.policy is None and adopted.policy is not None:
            self.state.policy = adopted.policy
        if request.budget is None and adopted.budget is not None:
            self.state.budget = adopted.budget
        # A tool's default approvers hold unless the policy names approvers for that tool.
        self.state.policy.approvers = adopted.tool_approvers | self.state.policy.approvers
        self._settle_signatures()
        for server in adopted.mcp_servers:
            await self._list_mcp_tools(server)

    async def _list_mcp_tools(self, server: str) -> None:
        """Read an MCP server's tool list once, in an activity: the history keeps it, so a
        replay sees the tools the run started with, whatever the server lists later."""
        listing: MCPListing = await workflow.execute_activity(
            LIST_MCP_TOOLS,
            MCPListRequest(run_id=self.state.store_key, agent=self._agent.name, server=server),
            result_type=MCPListing,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=10),
            summary=f"mcp: list {server}",
        )
        taken = {t.name for t in self._agent.tools}
        for spec in listing.tools:
            if spec.name in taken or spec.name in INTERNAL_TOOLS:
                listing.skipped.append(f"{spec.name}: another tool has that name")
                continue
            taken.add(spec.name)
            self._agent.tools.append(
                ToolRecord(
                    name=spec.name,
                    risk=spec.risk,
                    schema_digest=spec.schema_digest,
                    mcp=server,
                    mcp_name=spec.mcp_name,
                )
            )
        names = ", ".join(f"{t.name} ({t.risk.value})" for t in listing.tools) or "none"
        self.state.log(workflow.now(), "system", "mcp_tools", preview(f"{server}: {names}", 500))
        for skipped in listing.skipped:
            self.state.log(workflow.now(), "system", "mcp_tool_skipped", preview(skipped, 300))

    @property
    def _agent(self) -> AgentRecord:
        """The run's recorded agent; runs from before agents existed record theirs now."""
        if self.state.agent is None:
            self.state.agent = self._registry().agent(BEFORE_AGENTS).record()
        return self.state.agent

    def _agent_code(self) -> Agent:
        return self._registry().agent(self._agent.name)

    def _tool(self, name: str) -> tuple[Tool, ToolRecord | None] | None:
        """The worker's tool for a name the run may call, checked against the record."""
        if name in INTERNAL_TOOLS:
            return INTERNAL_TOOLS[name], None
        record = self._agent.tool(name)
        if record is None:
            return None
        return self._registry().tool_for(record, self._agent.name), record

    def _step_tools(self) -> tuple[str, ...]:
        own = tuple(t.name for t in self._agent.tools)
        if self._agent.planning:
            return (COMPLETE_STEP, ASK_HUMAN, *own)
        return (ASK_HUMAN, *own)

    def _start_as_fork(self, fork: ForkSpec) -> None:
        try:
            parent_state = RunState.model_validate(fork.state)
        except ValidationError as err:
            self._fork_error = f"the fork's starting state is invalid: {_describe(err)}"
            return
        now = workflow.now()
        self._parent_store_key = parent_state.store_key
        self.state = parent_state.forked(workflow.info().workflow_id, fork.parent_run_id, now)
        if fork.edit is not None and self.state.patch_error(fork.edit) is None:
            self.state.apply_patch(fork.edit, now)

    @workflow.run
    async def run(self, request: RunRequest) -> RunResult:
        self._publish()
        if (forged := _forged_start(request, self.state, workflow.info())) is not None:
            # Before anything is written: a caller never chooses a run's identity.
            raise ApplicationError(forged, type="StartRefused", non_retryable=True)
        if not request.resumes and workflow.patched(RUN_IDENTITY_PATCH):
            self.state.identity = run_identity(workflow.info())
        self._settle_signatures()
        fresh = not request.resumes and request.fork is None
        if fresh and self.state.agent is None and workflow.patched(AGENT_RECORD_PATCH):
            self._moment("started", f"agent {request.agent or BEFORE_AGENTS}")
            await self._adopt_agent(request)
        if self._fork_error is not None:
            self._fail(RunFailed(self._fork_error))
        if request.fork is not None and not request.resumes and self.state.parent:
            if workflow.patched(FORK_CHECKED_PATCH):
                await self._take_parent_facts(request.fork)
            self._moment("forked", f"from {self.state.parent.run_id} at {self.state.parent.moment}")
            await self._copy_parent_transcript(self._parent_store_key or self.state.parent.run_id)
        self._story = asyncio.create_task(self._tell())
        if self._cancel_holds():
            self._story.cancel()
        try:
            return await self._end_of_story()
        finally:
            # Signals this run sent (spend reports, forwarded pauses) are delivered before
            # it closes: none is left in flight behind a closed run.
            await self._signals_sent()

    async def _end_of_story(self) -> RunResult:
        assert self._story is not None
        try:
            answer = await self._story
        except (asyncio.CancelledError, ActivityError) as err:
            if not _is_cancellation(err):
                self._fail(err)
            self.state.cancel(workflow.now())
            self._publish()
            self._moment("cancelled", self.state.cancel_requested_by or "temporal")
            if self.state.cancel_requested_by is None:
                # Cancelled through Temporal itself (Web UI, `temporal workflow cancel`):
                # end as Canceled there too.
                raise asyncio.CancelledError() from err
            return RunResult(
                run_id=self.state.run_id, status=self.state.status, spent=self.state.spent
            )
        except RunFailed as err:
            self._fail(err)
        self.state.complete(answer, workflow.now())
        self._publish()
        self._moment("completed", preview(answer, 80))
        return RunResult(
            run_id=self.state.run_id,
            status=self.state.status,
            final_answer=answer,
            effects=self.state.effects,
            spent=self.state.spent,
        )

    def _fail(self, err: BaseException) -> NoReturn:
        reason = _failure_reason(err)
        self.state.fail(reason, workflow.now())
        self._publish()
        self._moment("failed", reason)
        raise ApplicationError(reason, type="AgentRunFailed", non_retryable=True) from err

    async def _tell(self) -> str:
        if not self._agent.planning:
            return await self._loop()
        if not self.state.plan:  # a fork made after planning keeps its plan
            await self._plan()
        while (step := self.state.next_step()) is not None:
            await self._continue_as_new_if_due()
            await self._run_step(step)
        return await self._final_answer()

    async def _continue_as_new_if_due(self) -> None:
        """Between steps, when the history has grown long, go on in a fresh run with the same
        id, carrying the state: a run of any length stays under Temporal's history limits."""
        info = workflow.info()
        limit = self.state.limits.continue_as_new_after_events
        length = info.get_current_history_length()
        if not (info.is_continue_as_new_suggested() or (limit and length >= limit)):
            return
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._signals_sent()
        self.state.log(workflow.now(), "system", "continued_as_new", f"after {length} events")
        self._moment("continued as new", f"run {self.state.chain} ended after {length} events")
        workflow.continue_as_new(
            RunRequest(
                goal=self.state.goal,
                agent=self._agent.name,
                label=self.state.label,
                policy=self.state.policy,
                limits=self.state.limits,
                budget=self.state.budget,
                resume_state_packed=pack_state(self.state),
            )
        )

    # -- the story's chapters ---------------------------------------------------------
    async def _plan(self) -> None:
        self.state.phase_start_seq = self.state.next_seq
        self.state.queue_message("user", prompts.goal_message(self.state.goal))
        for _ in range(self.state.limits.max_plan_attempts):
            turn = await self._model_turn("plan", PLAN_TOOLS, force_tool=SUBMIT_PLAN)
            plan: SubmitPlanArgs | None = None
            for call in turn.tool_calls:
                valid = self._validated_call(call, allowed=PLAN_TOOLS)
                args = valid[2] if valid is not None else None
                if isinstance(args, SubmitPlanArgs) and plan is None:
                    plan = args
                    self.state.queue_message("tool", prompts.PLAN_ACCEPTED, call.id)
                elif args is not None:
                    self.state.queue_message("tool", "error: one plan only", call.id)
            if plan is not None:
                self.state.set_plan(plan.steps, workflow.now())
                return
            if not turn.tool_calls:
                self.state.queue_message("user", f"Call {SUBMIT_PLAN} with your plan.")
        raise RunFailed(
            f"the model gave no valid plan in {self.state.limits.max_plan_attempts} attempts"
        )

    def _open_step(self, step: PlanStep, instruction: str) -> None:
        """A step begins: its phase of the transcript starts with the instruction."""
        self.state.start_step(step, workflow.now())
        self._publish()
        self.state.phase_start_seq = self.state.next_seq
        self.state.flush_notes()
        self.state.queue_message("user", instruction)

    async def _run_step(self, step: PlanStep) -> None:
        self._open_step(step, prompts.step_message(step.index, len(self.state.plan), step.title))
        for _ in range(self.state.limits.max_turns_per_step):
            step.turns += 1
            turn = await self._model_turn(f"step {step.index}", self._step_tools())
            if not turn.tool_calls:
                if self._cut_short(turn):
                    reason = turn.finish_reason or "?"
                    self.state.queue_message("user", prompts.CUT_SHORT.format(reason=reason))
                    continue
                if self.state.limits.steps_end == "complete_step":
                    self.state.queue_message("user", prompts.END_WITH_COMPLETE_STEP)
                    continue
                self.state.complete_step(step, turn.content_preview, workflow.now())
                return
            done_summary: str | None = None
            for call in turn.tool_calls:
                summary = await self._handle_tool_call(step, call, turn.content_preview)
                done_summary = summary if summary is not None else done_summary
            if done_summary is not None:
                self.state.complete_step(step, done_summary, workflow.now())
                return
        raise RunFailed(
            f"step {step.index} did not finish within {self.state.limits.max_turns_per_step} "
            "model turns"
        )

    async def _loop(self) -> str:
        """A plain tool loop: the goal, then model turns until a reply calls no tool. It is
        one step of the run's plan, so state, forks and the console read it like any."""
        if not self.state.plan:
            self.state.set_plan([prompts.LOOP_STEP_TITLE], workflow.now())
        step = self.state.next_step()
        if step is None:  # a fork of a finished loop
            return self.state.final_answer or ""
        self._open_step(step, prompts.task_message(self.state.goal))
        parts: list[str] = []
        for _ in range(self.state.limits.max_turns_per_step):
            step.turns += 1
            turn = await self._model_turn(
                f"turn {step.turns}", self._step_tools(), answer_chars=FINAL_ANSWER_CHARS
            )
            if turn.tool_calls:
                parts = []
                for call in turn.tool_calls:
                    await self._handle_tool_call(step, call, turn.content_preview)
                continue
            parts.append(turn.content_preview)
            if self._cut_short(turn):
                reason = turn.finish_reason or "?"
                self.state.queue_message("user", prompts.FINAL_CUT_SHORT.format(reason=reason))
                continue
            answer = " ".join(part for part in parts if part)
            self.state.complete_step(step, preview(answer), workflow.now())
            return answer
        raise RunFailed(
            f"the agent gave no answer within {self.state.limits.max_turns_per_step} model turns"
        )

    async def _handle_tool_call(self, step: PlanStep, call: ToolCall, reason: str) -> str | None:
        """Gate and run one tool call. Returns the summary when the call ends the step."""
        valid = self._validated_call(call, allowed=self._step_tools())
        if valid is None:
            return None
        spec, record, args = valid
        if isinstance(args, CompleteStepArgs):
            self.state.queue_message("tool", prompts.STEP_MARKED_DONE, call.id)
            return args.summary
        if isinstance(args, AskHumanArgs):
            await self._ask_human(step, call, args)
            return None
        if record is None:  # a built-in tool the workflow handles, none left here
            return None
        rule = approval_rule(record, args, self.state.policy, self.state.usage.cost_usd)
        verdict = await self._rules_verdict(step, record, args)
        if verdict is not None and verdict.decision == "deny":
            text = prompts.denied(spec.name, verdict.rule, verdict.reason)
            self.state.queue_message("tool", text, call.id)
            self._moment("denied by rule", f"{spec.name} ({verdict.rule})")
            return None
        if rule is None and verdict is not None and verdict.decision == "ask":
            rule = f"rule {verdict.rule}: {verdict.reason}"
        if rule is not None:
            request = await self._await_approval(step, call, spec, args, reason, rule)
            if request.status is not ApprovalStatus.APPROVED:
                text = prompts.rejected(spec.name, request.decided_by or "?", request.comment)
                self.state.queue_message("tool", text, call.id)
                return None
        await self._pause_point()
        await self._within_budget("delegate" if spec.delegate_to else "tool")
        if spec.delegate_to is not None and isinstance(args, DelegateArgs):
            await self._delegate(step, call, spec, args)
        else:
            await self._run_tool(step, call, spec, args, record)
        return None

    async def _rules_verdict(
        self, step: PlanStep, record: ToolRecord, args: BaseModel
    ) -> CallVerdict | None:
        """The agent's own approval rules, in order: the first deny wins; else the first
        ask; approvals change nothing (declared risks and the policy still apply). Each
        verdict goes into the audit log; an evaluator's is in the history too."""
        if not self._agent.rules:
            return None
        code = {rule_name(rule): rule for rule in self._agent_code().rules}
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
        for name in self._agent.rules:
            rule = code.get(name)
            if rule is None:
                raise AgentUnavailable(
                    f"this worker's agent {self._agent.name!r} has no approval rule {name!r}, "
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
                    EvaluationInput(agent=self._agent.name, rule=name, call=review.model_dump()),
                    result_type=CallVerdict,
                    start_to_close_timeout=rule.timeout,
                    retry_policy=RetryPolicy(maximum_attempts=5),
                    summary=f"rule: {name} on {review.tool}",
                )
                return verdict
            except ActivityError as err:
                if _is_cancellation(err):
                    raise
                reason = f"the evaluator failed ({_failure_reason(err)}); a person decides"
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

    async def _await_approval(
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
            deadline=workflow.now() + self._decision_timeout,
        )
        self.state.request_approval(request)
        self._publish()
        self._moment("approval requested", f"{spec.name} ({rule})")

        def decided() -> bool:
            return request.status is not ApprovalStatus.PENDING

        if not await self._wait(decided) and self.state.policy.on_timeout == "escalate":
            self.state.escalate(request, workflow.now() + self._decision_timeout, workflow.now())
            self._publish()
            self._moment("approval escalated", spec.name)
            await self._wait(decided)
        if not decided():
            late = Decision(
                request_id=request.request_id, by=DEADLINE_ACTOR, comment="no decision in time"
            )
            self.state.decide(late, False, workflow.now())
            self._moment("deadline passed", f"{spec.name} rejected")
        self._publish()
        return request

    async def _ask_human(self, step: PlanStep, call: ToolCall, args: AskHumanArgs) -> None:
        question = Question(
            question_id=call.id,
            question=args.question,
            options=args.options,
            step=step.index,
            asked_at=workflow.now(),
            deadline=workflow.now() + self._decision_timeout,
        )
        self.state.ask(question)
        self._publish()
        self._moment("question asked", preview(args.question, 80))
        if not await self._wait(lambda: question.status is not QuestionStatus.PENDING):
            self.state.expire(question, workflow.now())
            self._moment("deadline passed", "question expired")
        self._publish()
        if question.status is QuestionStatus.ANSWERED:
            text = f"answer from {question.answered_by}: {question.answer}"
        else:
            text = "no answer came before the deadline; decide without it"
        self.state.queue_message("tool", text, call.id)

    async def _run_tool(
        self, step: PlanStep, call: ToolCall, spec: Tool, args: BaseModel, record: ToolRecord
    ) -> None:
        key = None
        if spec.risk is not ToolRisk.READ_ONLY:
            key = idempotency_key(self.state.store_key, step.index, call.id)
        tool_input = ToolCallInput(
            run_id=self.state.store_key,
            step=step.index,
            tool_call_id=call.id,
            name=spec.name,
            arguments=args.model_dump(mode="json"),
            result_seq=self.state.take_seq(),
            side_effect=key is not None or None,
            agent=self._agent.name if record.mcp else None,
            mcp=record.mcp,
            mcp_name=record.mcp_name,
        )
        self.state.tool_calls += 1
        self._moment("tool", f"{spec.name} (seq {tool_input.result_seq})", tool_input.result_seq)
        timeout = spec.timeout or timedelta(seconds=self.state.limits.tool_timeout_seconds)
        retry = spec.retry or RetryPolicy(
            maximum_interval=timedelta(seconds=10), maximum_attempts=20
        )
        try:
            outcome: ToolOutcome = await workflow.execute_activity(
                CALL_MCP_TOOL if record.mcp else RUN_TOOL,
                tool_input,
                result_type=ToolOutcome,
                start_to_close_timeout=timeout,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=retry,
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"tool: {spec.name}",
            )
        except ActivityError as err:
            if _is_cancellation(err) or not workflow.patched(TOOL_ERRORS_PATCH):
                raise
            self._report_spend()
            # The tool failed for good: the model hears why; the run goes on.
            text = prompts.tool_failed(spec.name, _failure_reason(err))
            self.state.queue_message("tool", text, call.id)
            failed = ToolResultRecord(
                step=step.index,
                tool_call_id=call.id,
                tool=spec.name,
                ok=False,
                summary=preview(text),
                seq=tool_input.result_seq,
            )
            self.state.record_tool_result(failed, workflow.now())
            self._moment("tool failed", spec.name)
            return
        if key is not None:  # the ledger's recorded result for this key: what really happened
            effect = EffectSummary(tool=spec.name, idempotency_key=key, ok=outcome.ok)
            self.state.record_effect(effect)
        result = ToolResultRecord(
            step=step.index,
            tool_call_id=call.id,
            tool=spec.name,
            ok=outcome.ok,
            summary=outcome.summary,
            seq=outcome.result_seq,
        )
        self.state.record_tool_result(result, workflow.now())
        self._report_spend()

    # -- delegation: a sub-agent as a child workflow ------------------------------------------
    async def _delegate(
        self, step: PlanStep, call: ToolCall, spec: Tool, args: DelegateArgs
    ) -> None:
        """Run the sub-agent on the task as a child workflow and hand its answer to the model.
        A fork made after this delegation reuses its answer for the same task."""
        agent = spec.delegate_to or ""
        reused = self.state.reusable_delegation(agent, step.index, args.task)
        if reused is not None:
            self._moment("delegate answer reused", f"{agent}: {reused.child_id}")
            self._delegate_answered(step, call, spec, reused.child_id, "completed", reused.answer)
            return
        now = workflow.now()
        child_id = child_run_id(self.state.run_id, self.state.store_key, step.index, call.id)
        delegation = Delegation(
            child_id=child_id,
            agent=agent,
            tool=spec.name,
            step=step.index,
            tool_call_id=call.id,
            task=preview(args.task, 500),
            started_at=now,
            report_token=str(workflow.uuid4()),
        )
        self.state.start_delegation(delegation, now)
        self._moment("delegated", f"{agent}: {child_id}")
        request = RunRequest(
            goal=args.task,
            agent=agent,
            label=self.state.label,
            policy=self.state.policy,
            budget=self.state.remaining_budget(now, delegation),
            delegated_by=DelegatedBy(
                run_id=self.state.run_id,
                step=step.index,
                tool_call_id=call.id,
                agent=self._agent.name,
                identities=[*signed_changes.runs_above(self.state), self.state.store_key][-20:],
                report_token=delegation.report_token,
            ),
        )
        self._active_child = child_id
        try:
            result = await self._child_result(child_id, request)
        except ChildWorkflowError as err:
            if isinstance(err.cause, CancelledError):
                result = RunResult(run_id=child_id, status="cancelled")
            else:
                result = RunResult(run_id=child_id, status="failed", error=_failure_reason(err))
        finally:
            self._active_child = None
        faults.reached("after_child_answer", child_id)
        answer = result.final_answer if result.status == "completed" else result.error
        self.state.finish_delegation(child_id, result.status, answer, result.spent, workflow.now())
        self._moment("delegate answered", f"{agent}: {result.status}")
        self._delegate_answered(step, call, spec, child_id, result.status, answer)
        self._report_spend()

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
                static_summary=f"sub-agent {request.agent} for {self.state.run_id}",
            )
        except WorkflowAlreadyStartedError:
            return await self._await_started_child(child_id)
        faults.reached("after_child_start", child_id)
        result: RunResult = await handle
        return result

    async def _await_started_child(self, child_id: str) -> RunResult:
        """The child's run already exists (the parent was reset to before its start): wait
        for its answer in an activity; cancelling the parent cancels it too."""
        try:
            result: RunResult = await workflow.execute_activity(
                AWAIT_RUN,
                child_id,
                result_type=RunResult,
                start_to_close_timeout=timedelta(days=365),
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                summary=f"wait for sub-agent {child_id}",
            )
            return result
        except ActivityError as err:
            if _is_cancellation(err):
                await workflow.get_external_workflow_handle(child_id).cancel()
                raise
            return RunResult(run_id=child_id, status="failed", error=_failure_reason(err))

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
        self.state.queue_message("tool", text, call.id)
        result = ToolResultRecord(
            step=step.index,
            tool_call_id=call.id,
            tool=spec.name,
            ok=status == "completed",
            summary=preview(text),
            seq=self.state.outbox[-1].seq,
        )
        self.state.record_tool_result(result, workflow.now())

    def _report_spend(self) -> None:
        """A sub-agent's run tells its parent what it has spent, after each call: the
        parent's budget and views roll it up while the child still runs."""
        parent = self.state.delegated_by
        if parent is None:
            return
        report = ChildSpend(
            child_id=self.state.run_id, spent=self.state.spent, token=parent.report_token
        )
        self._signal_later(parent.run_id, CHILD_SPENT, report)

    def _signal_later(self, run_id: str, name: str, payload: BaseModel) -> None:
        """Signal another run without waiting for it (from a handler, or mid-story)."""
        task = asyncio.create_task(self._signal_quietly(run_id, name, payload))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _signal_quietly(self, run_id: str, name: str, payload: BaseModel) -> None:
        try:
            await workflow.get_external_workflow_handle(run_id).signal(name, payload)
        except Exception as err:  # the other run closed: nothing left to tell it
            workflow.logger.info("signal %s to %s not delivered: %s", name, run_id, err)

    async def _signals_sent(self) -> None:
        if self._sending:
            await workflow.wait(list(self._sending))

    def _forward(self, name: str, payload: BaseModel) -> None:
        """Pass a person's pause, resume or budget on to the sub-agent this run waits on."""
        if self._active_child is not None:
            self._signal_later(self._active_child, name, payload)

    # -- budget: the run does not fail when it is spent, it waits for a person ------------
    async def _within_budget(self, call: str) -> None:
        while (reason := self.state.budget_error(call, workflow.now())) is not None:
            await self._ask_for_budget(call, reason)

    async def _ask_for_budget(self, call: str, reason: str) -> None:
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
            deadline=workflow.now() + self._decision_timeout,
        )
        self.state.request_approval(request)
        self._publish()
        self._moment("budget reached", reason)
        decided = await self._wait(lambda: request.status is not ApprovalStatus.PENDING)
        self._publish()
        if decided and request.status is ApprovalStatus.APPROVED:
            return
        by = request.decided_by or DEADLINE_ACTOR
        if not decided:
            late = Decision(request_id=request.request_id, by=by, comment="no raise in time")
            self.state.decide(late, False, workflow.now())
        stop = Actor(by=by, reason=f"stopped at its budget: {reason}")
        self.state.request_cancel(stop, workflow.now())
        raise asyncio.CancelledError()

    async def _final_answer(self) -> str:
        self.state.phase_start_seq = self.state.next_seq
        self.state.flush_notes()
        recap = self.state.context if self.state.limits.context == "step" else []
        self.state.queue_message("user", prompts.final_message(recap))
        parts: list[str] = []
        for _ in range(self.state.limits.max_turns_per_step):
            turn = await self._model_turn("final answer", (), preview_chars=FINAL_ANSWER_CHARS)
            parts.append(turn.content_preview)
            if not self._cut_short(turn):
                break
            reason = turn.finish_reason or "?"
            self.state.queue_message("user", prompts.FINAL_CUT_SHORT.format(reason=reason))
        return " ".join(part for part in parts if part)

    @staticmethod
    def _cut_short(turn: ModelTurn) -> bool:
        """A reply the endpoint cut before the model was done: not an answer."""
        return turn.finish_reason in CUT_SHORT_REASONS and workflow.patched(CUT_SHORT_PATCH)

    # -- helpers --------------------------------------------------------------------------
    async def _model_turn(
        self,
        label: str,
        tools: tuple[str, ...],
        *,
        force_tool: str | None = None,
        preview_chars: int = PREVIEW_CHARS,
        answer_chars: int | None = None,
    ) -> ModelTurn:
        await self._pause_point()
        await self._within_budget("model")
        call = ModelCallInput(
            run_id=self.state.store_key,
            append=self.state.drain_outbox(),
            reply_seq=self.state.take_seq(),
            tools=list(tools),
            force_tool=force_tool,
            # Named unless it is the default: a few bytes less in every step's history.
            agent=None if self._agent.name == BEFORE_AGENTS else self._agent.name,
            run_label=self.state.label,
            label=label,
            preview_chars=preview_chars,
            answer_chars=answer_chars,
            context_from_seq=(
                self.state.phase_start_seq if self.state.limits.context == "step" else None
            ),
            **self.state.call_budget(),
        )
        self._moment("model", f"{label} (seq {call.reply_seq})", call.reply_seq)
        while True:
            turn = await self._call_model(call)
            if turn.over_budget is None:
                break
            # Not made: it would have passed the budget. Made once someone raises it.
            await self._ask_for_budget("model", turn.over_budget)
            call = call.model_copy(update=self.state.call_budget())
        self.state.record_usage(turn.usage, memoized=turn.memoized)
        self._report_spend()
        return turn

    async def _call_model(self, call: ModelCallInput) -> ModelTurn:
        limits = self.state.limits
        turn: ModelTurn = await workflow.execute_activity(
            CALL_MODEL,
            call,
            result_type=ModelTurn,
            start_to_close_timeout=timedelta(seconds=limits.model_timeout_seconds),
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=1),
                maximum_interval=timedelta(seconds=30),
                maximum_attempts=limits.model_max_attempts,
            ),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary=f"model: {call.label}",
        )
        return turn

    def _cancel_holds(self) -> bool:
        """Whether a cancel was asked for and must take hold now (asked where it matters)."""
        return self.state.cancel_requested_by is not None and workflow.patched(CANCEL_HOLDS_PATCH)

    async def _pause_point(self) -> None:
        """Between activities: where a requested pause takes hold, and a cancel whose
        activity finished before it heard of it."""
        if self._cancel_holds():
            raise asyncio.CancelledError()
        if not self.state.pause_requested:
            return
        self.state.enter_pause()
        self._publish()
        self._moment("paused")
        await workflow.wait_condition(lambda: not self.state.pause_requested)
        self._publish()

    def _moment(self, kind: str, detail: str = "", seq: int | None = None) -> None:
        """A point of the run's timeline: numbered in the state, kept for the event protocol,
        offered for time travel."""
        self.state.moment += 1
        self.state.note_moment(kind, detail, workflow.now(), seq)
        timeline.offer(self.state, kind, detail)

    async def _take_parent_facts(self, fork: ForkSpec) -> None:
        """The parent's identity and policy as Temporal has them, not as the fork request
        says: the transcript is copied from the real parent, under the parent's policy; a
        parent requiring signed changes counts only a fork signed for this very fork."""
        facts: ParentFacts = await workflow.execute_activity(
            FORK_ORIGIN,
            fork.parent_run_id,
            result_type=ParentFacts,
            start_to_close_timeout=timedelta(minutes=1),
            retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=10),
            summary=f"fork: ask {fork.parent_run_id}",
        )
        self._parent_store_key, self.state.policy = facts.store_key, facts.policy
        self._settle_signatures()
        says = fork.what_it_says(workflow.info().workflow_id)
        by = fork.by or "anonymous"
        error = signed_changes.change_error(
            self.state, "fork", by, fork.signed, says, workflow.now(), runs=(facts.store_key,)
        )
        if error is not None:
            self._refuse(by, error)
            self._fail(RunFailed(f"refused: {error}"))
        if fork.by is not None:
            self.state.log(workflow.now(), fork.by, "forked_by", f"from {fork.parent_run_id}")

    async def _copy_parent_transcript(self, parent_store_key: str) -> None:
        copy = TranscriptCopy(
            from_run_id=parent_store_key,
            to_run_id=self.state.store_key,
            before_seq=self.state.next_seq,
        )
        await workflow.execute_activity(
            COPY_TRANSCRIPT,
            copy,
            start_to_close_timeout=timedelta(minutes=5),
            summary=f"fork: copy transcript of {workflow_id_of(parent_store_key)}",
        )

    @property
    def _decision_timeout(self) -> timedelta:
        return timedelta(seconds=self.state.policy.decision_timeout_seconds)

    async def _wait(self, done: Callable[[], bool]) -> bool:
        """Wait for a person, durably, up to the run's decision timeout."""
        if self._cancel_holds():
            raise asyncio.CancelledError()
        try:
            await workflow.wait_condition(done, timeout=self._decision_timeout)
        except TimeoutError:
            return False
        return True

    def _validated_call(self, call: ToolCall, *, allowed: tuple[str, ...]) -> ValidCall | None:
        """The tool called, its record and the model's arguments, validated; on error, tell
        the model and return None."""
        found = self._tool(call.name) if call.name in allowed else None
        if found is None:
            text = prompts.unknown_tool(call.name, list(allowed))
            self.state.queue_message("tool", text, call.id)
            return None
        spec, record = found
        if call.oversized is not None:
            text = prompts.argument_error(spec.name, f"{call.oversized:,} characters is too long")
            self.state.queue_message("tool", text, call.id)
            return None
        try:
            raw = json.loads(
                call.arguments or "{}", parse_constant=_no_constant, parse_float=_finite_float
            )
            if not isinstance(raw, dict):
                raise ValueError("arguments must be a JSON object")
            args = spec.args_model.model_validate(raw)
            if (where := _non_finite(args.model_dump())) is not None:
                raise ValueError(f"{where}: a number must be finite (not NaN or infinite)")
            return spec, record, args
        except (ValueError, ValidationError) as err:
            text = prompts.argument_error(spec.name, _describe(err))
            self.state.queue_message("tool", text, call.id)
            return None

    def _publish(self) -> None:
        """Keep the Web UI's current details and our search attributes in step with the state."""
        workflow.set_current_details(self.state.progress_line())
        wanted = (self.state.status.value, self.state.current_step or 0, self.state.waiting_for)
        if self._step_with_status is None:
            self._step_with_status = workflow.patched(STEP_WITH_STATUS_PATCH)
        if self._step_with_status:
            self._publish_with_status(*wanted)
            return
        before = self._published
        if wanted == before:
            return
        self._published = wanted
        # Only what changed: most steps move the step number alone, one payload, not three.
        status, step, waiting_for = before or (None, None, None)
        updates: list[SearchAttributeUpdate[Any]] = []
        if wanted[0] != status:
            updates.append(sa.STATUS.value_set(wanted[0]))
        if wanted[1] != step:
            updates.append(sa.STEP.value_set(wanted[1]))
        if wanted[2] != waiting_for:
            updates.append(sa.WAITING_FOR.value_set(wanted[2]))
        workflow.upsert_search_attributes(updates)

    def _publish_with_status(self, status: str, step: int, waiting_for: str) -> None:
        """Upsert only when the status or what the run waits for changed (what `list`, the
        inbox and the Web UI filter on), with the step of that moment in the same upsert:
        one action per change, none per step. Compared with the attributes the run has
        (its start's included), so a run started as planning upserts nothing at first."""
        now = workflow.info().typed_search_attributes
        if status == now.get(sa.STATUS) and waiting_for == (now.get(sa.WAITING_FOR) or ""):
            return
        updates: list[SearchAttributeUpdate[Any]] = []
        if status != now.get(sa.STATUS):
            updates.append(sa.STATUS.value_set(status))
        if waiting_for != (now.get(sa.WAITING_FOR) or ""):
            updates.append(sa.WAITING_FOR.value_set(waiting_for))
        if step != now.get(sa.STEP):
            updates.append(sa.STEP.value_set(step))
        workflow.upsert_search_attributes(updates)

    # -- people: signals (fire and forget) ------------------------------------------------
    # Handlers take whatever the wire carries (`*payload`) and validate it themselves: a
    # signal with no input, two inputs or another encoding is dropped with a warning and an
    # update refused, state unchanged, instead of failing the workflow task for good
    # (docs/architecture.md, invariant 8). Under `require_signed_decisions` every change
    # counts only when signed (workflows/signed_changes.py); a refusal is in the audit.
    @workflow.signal
    def approve(self, *payload: Any) -> None:
        if (decision := _signal_input("approve", payload, Decision)) is not None:
            self._apply_decision(decision, approved=True)

    @workflow.signal
    def reject(self, *payload: Any) -> None:
        if (decision := _signal_input("reject", payload, Decision)) is not None:
            self._apply_decision(decision, approved=False)

    @workflow.signal(name="answer")
    def answer_signal(self, *payload: Any) -> None:
        if (answer := _signal_input("answer", payload, Answer)) is None:
            return
        if (error := self.state.answer_error(answer)) is not None:
            workflow.logger.warning("answer ignored: %s", error)
            return
        self._settle_signatures()
        if (error := signed_changes.answer_error(self.state, answer, workflow.now())) is not None:
            self._refuse(answer.by, error)
            workflow.logger.warning("answer refused: %s", error)
            return
        self.state.answer(answer, workflow.now())
        self._publish()
        self._moment("answered", answer.by)

    @workflow.signal
    def pause(self, *payload: Any) -> None:
        if (actor := _signal_input("pause", payload, Actor)) is None:
            return
        if self.state.status.is_closed or self.state.pause_requested:
            return
        if self._counts("pause", actor.by, actor.signed, {"reason": actor.reason}):
            self.state.request_pause(actor, workflow.now())
            self._moment("pause requested", actor.by)
            self._forward("pause", actor)

    @workflow.signal
    def resume(self, *payload: Any) -> None:
        if (actor := _signal_input("resume", payload, Actor)) is None:
            return
        if not self._counts("resume", actor.by, actor.signed, {"reason": actor.reason}):
            return
        if self.state.pause_requested:
            self.state.resume(actor, workflow.now())
            self._publish()
            self._moment("resumed", actor.by)
        self._forward("resume", actor)

    @workflow.signal
    def cancel(self, *payload: Any) -> None:
        if (actor := _signal_input("cancel", payload, Actor)) is None:
            return
        if self.state.status.is_closed or self.state.cancel_requested_by is not None:
            return
        if not self._counts("cancel", actor.by, actor.signed, {"reason": actor.reason}):
            return
        self.state.request_cancel(actor, workflow.now())
        self._moment("cancel requested", actor.by)
        if self._story is not None:
            self._story.cancel()

    @workflow.signal(name=CHILD_SPENT)
    def child_spent(self, *payload: Any) -> None:
        """A sub-agent's run reports its spend; from a run that is not one, it is dropped."""
        if (report := _signal_input(CHILD_SPENT, payload, ChildSpend)) is None:
            return
        if not self.state.child_spent(report.child_id, report.spent, report.token):
            workflow.logger.warning(
                "child_spent dropped: %s is no running sub-agent", report.child_id
            )

    @workflow.signal(name="budget")
    def budget_signal(self, *payload: Any) -> None:
        """A new budget sent by the parent (a person raised the tree's budget there)."""
        if (raise_ := _signal_input("budget", payload, BudgetRaise)) is None:
            return
        if (error := self.state.budget_raise_error(raise_, workflow.now())) is not None:
            workflow.logger.warning("budget ignored: %s", error)
            return
        if (error := signed_changes.forwarded_raise_error(self.state, raise_)) is not None:
            self._refuse(raise_.by, error)
            return
        signed = raise_.forwarded or raise_
        if self._counts("raise_budget", signed.by, signed.signed, signed.what_it_says()):
            self._apply_budget(raise_)

    @workflow.update(name="raise_budget")
    def raise_budget(self, *payload: Any) -> RunBudget:
        raise_ = _update_input("raise_budget", payload, BudgetRaise)
        _refuse_if(self._raise_error(raise_))
        self._must_count("raise_budget", raise_.by, raise_.signed, raise_.what_it_says())
        return self._apply_budget(raise_)

    @raise_budget.validator
    def _validate_raise_budget(self, *payload: Any) -> None:
        _refuse_if(self._raise_error(_update_input("raise_budget", payload, BudgetRaise)))

    def _raise_error(self, raise_: BudgetRaise) -> str | None:
        if raise_.forwarded is not None:
            return "a forwarded raise comes from a parent run, as its `budget` signal"
        return self.state.budget_raise_error(raise_, workflow.now())

    def _apply_budget(self, raise_: BudgetRaise) -> RunBudget:
        budget = self.state.raise_budget(raise_, workflow.now())
        self._publish()
        self._moment("budget raised", raise_.by)
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
            self._forward("budget", forwarded)
        return budget

    def _apply_decision(self, decision: Decision, *, approved: bool) -> None:
        if (error := self.state.decision_error(decision, approved)) is not None:
            workflow.logger.warning("decision ignored: %s", error)
            return
        self._settle_signatures()
        now = workflow.now()
        if error := signed_changes.decision_error(self.state, decision, approved, now):
            self._refuse(decision.by, error)
            workflow.logger.warning("decision refused: %s", error)
            return
        decided = self.state.decide(decision, approved, workflow.now())
        self._publish()
        self._moment(decided.status.value, f"{decided.tool} by {decision.by}")

    def _refuse(self, by: str, error: str) -> None:
        """A change that did not count: in the audit log and on the timeline."""
        self.state.refuse(by, error, workflow.now())
        self._moment("decision refused", preview(f"{by}: {error}", 120))

    def _settle_signatures(self) -> None:
        """Which signatures this run takes (workflows/signing.py), asked once its policy
        requires them: v2 from the `every-change-signed` patch on, v1 before it."""
        if self._signatures_settled or not self.state.policy.require_signed_decisions:
            return
        self._signatures_settled = True
        self.state.signature_version = 2 if workflow.patched(EVERY_CHANGE_SIGNED_PATCH) else 1

    def _counts(self, action: Action, by: str, signed: SignedDecision | None, says: Any) -> bool:
        """Whether a person's change counts (always, unless the policy requires signed
        changes); one that does not is refused in the audit, and nothing else changes."""
        return self._change_refused(action, by, signed, says) is None

    def _must_count(
        self, action: Action, by: str, signed: SignedDecision | None, says: Any
    ) -> None:
        """`_counts` for an update: a refusal is recorded, then raised to the caller."""
        _refuse_if(self._change_refused(action, by, signed, says))

    def _change_refused(
        self, action: Action, by: str, signed: SignedDecision | None, says: Any
    ) -> str | None:
        self._settle_signatures()
        now = workflow.now()
        error = signed_changes.change_error(self.state, action, by, signed, says, now)
        if error is not None:
            self._refuse(by, error)
            workflow.logger.warning("%s refused: %s", action, error)
            return error
        signed_changes.note_used(self.state, signed, now)
        return None

    # -- people: updates (answered, validated before they reach the history) -------------
    @workflow.update
    def decide(self, *payload: Any) -> ApprovalRequest:
        request = _update_input("decide", payload, DecideRequest)
        # Re-checked here too: two updates validated in one activation must not both win.
        _refuse_if(self.state.decision_error(request.as_decision(), request.approve))
        # Checked here, not in the validator, so a forged or unsigned decision is recorded.
        self._settle_signatures()
        now = workflow.now()
        decision = request.as_decision()
        error = signed_changes.decision_error(self.state, decision, request.approve, now)
        if error is not None:
            self._refuse(request.by, error)
            _refuse_if(error)
        decided = self.state.decide(decision, request.approve, now)
        self._publish()
        self._moment(decided.status.value, f"{decided.tool} by {request.by}")
        return decided

    @decide.validator
    def _validate_decide(self, *payload: Any) -> None:
        request = _update_input("decide", payload, DecideRequest)
        _refuse_if(self.state.decision_error(request.as_decision(), request.approve))

    @workflow.update(name="submit_answer")
    def submit_answer(self, *payload: Any) -> Question:
        answer = _update_input("submit_answer", payload, Answer)
        _refuse_if(self.state.answer_error(answer))
        self._settle_signatures()
        if (error := signed_changes.answer_error(self.state, answer, workflow.now())) is not None:
            self._refuse(answer.by, error)
            _refuse_if(error)
        question = self.state.answer(answer, workflow.now())
        self._publish()
        self._moment("answered", answer.by)
        return question

    @submit_answer.validator
    def _validate_answer(self, *payload: Any) -> None:
        answer = _update_input("submit_answer", payload, Answer)
        _refuse_if(self.state.answer_error(answer))

    @workflow.update
    def edit(self, *payload: Any) -> RunState:
        patch = _update_input("edit", payload, StatePatch)
        _refuse_if(self.state.patch_error(patch))
        self._must_count("edit", patch.by, patch.signed, patch.changes())
        self.state.apply_patch(patch, workflow.now())
        self._publish()
        self._moment("edited", patch.by)
        # The answer lands in the history: the kept events stay out (the events query has them).
        return self.state.model_copy(update={"events": []})

    @edit.validator
    def _validate_edit(self, *payload: Any) -> None:
        _refuse_if(self.state.patch_error(_update_input("edit", payload, StatePatch)))

    @workflow.update(name="authorize_rewind")
    def authorize_rewind(self, *payload: Any) -> str:
        """`agentctl rewind` asks first, so a run that requires signed changes checks who
        rewinds it (and records it) before the reset; the reset itself is Temporal's."""
        request = _update_input("authorize_rewind", payload, RewindRequest)
        _refuse_if(self.state.rewind_error(request.moment))
        self._must_count("rewind", request.by, request.signed, {"moment": request.moment})
        self.state.log(workflow.now(), request.by, "rewind_authorized", f"to {request.moment}")
        return f"rewind to moment {request.moment} authorized for {request.by}"

    @authorize_rewind.validator
    def _validate_rewind(self, *payload: Any) -> None:
        request = _update_input("authorize_rewind", payload, RewindRequest)
        _refuse_if(self.state.rewind_error(request.moment))

    # -- queries: they take no input, and ignore any sent ---------------------------------
    @workflow.query(name="state")
    def get_state(self, *_: Any) -> RunState:
        return self.state

    @workflow.query(name="summary")
    def get_summary(self, *_: Any) -> RunSummary:
        return RunSummary.of(self.state)

    @workflow.query(name="events")
    def get_events(self, *payload: Any) -> EventPage:
        """The run's events after an offset (docs/events.md): `{"after": N}`, or nothing
        for all it keeps. Answers without touching the history."""
        return self.state.event_page(_events_after(payload))

    @workflow.query(name="pending_approvals")
    def get_pending_approvals(self, *_: Any) -> list[ApprovalRequest]:
        return self.state.pending_approvals

    @workflow.query(name="pending_questions")
    def get_pending_questions(self, *_: Any) -> list[Question]:
        return self.state.pending_questions


InputModel = TypeVar("InputModel", bound=BaseModel)
# A tool call the workflow may run: the worker's tool, the run's record of it (None for a
# built-in tool) and the validated arguments.
ValidCall = tuple[Tool, ToolRecord | None, BaseModel]


def _parse_input(name: str, payload: tuple[Any, ...], model: type[InputModel]) -> InputModel:
    """The one input a handler takes, validated; ValueError says in one line what is wrong."""
    if len(payload) != 1:
        raise ValueError(f"{name} takes exactly one input, got {len(payload)}")
    value = payload[0]
    if isinstance(value, model):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"{name} takes a JSON object, got {type(value).__name__}")
    try:
        return model.model_validate(value)
    except ValidationError as err:
        raise ValueError(f"{name}: {_describe(err)}") from None


def _events_after(payload: tuple[Any, ...]) -> int:
    if not payload:
        return 0
    value = payload[0]
    after = value.get("after", 0) if isinstance(value, dict) and len(payload) == 1 else None
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise ValueError('events takes nothing or {"after": N}, N a whole number >= 0')
    return after


def _signal_input(
    name: str, payload: tuple[Any, ...], model: type[InputModel]
) -> InputModel | None:
    try:
        return _parse_input(name, payload, model)
    except ValueError as err:
        workflow.logger.warning("signal dropped: %s", err)
        return None


def _update_input(name: str, payload: tuple[Any, ...], model: type[InputModel]) -> InputModel:
    try:
        return _parse_input(name, payload, model)
    except ValueError as err:
        raise ApplicationError(str(err), type="InputRefused", non_retryable=True) from None


def _forged_start(request: RunRequest, state: RunState, info: workflow.Info) -> str | None:
    """Why a start request may not be taken: carried state or a parent that Temporal says
    this run does not have (a caller would then write under another run's identity)."""
    if request.resumes:
        if info.continued_run_id is None:
            return "refused: a start request may not carry a run's state (resume_state)"
        mine = run_identity(info)
        if state.run_id != info.workflow_id or state.identity not in (None, mine):
            return "refused: the carried state belongs to another run"
    elif request.delegated_by is not None:
        parent = info.parent
        if parent is None or parent.workflow_id != request.delegated_by.run_id:
            return "refused: delegated_by names a run that did not start this one"
    return None


def run_identity(info: workflow.Info) -> str:
    """Who owns a run's stored data: the workflow id with the first execution's run id,
    which continue-as-new and reset keep and a reused workflow id does not (invariant 9)."""
    return f"{info.workflow_id}{IDENTITY_SEPARATOR}{info.first_execution_run_id}"


def _is_cancellation(err: BaseException) -> bool:
    if isinstance(err, asyncio.CancelledError):
        return True
    return isinstance(err, ActivityError) and isinstance(err.cause, CancelledError)


def _refuse_if(error: str | None) -> None:
    if error is not None:
        raise ApplicationError(error, type="InputRefused", non_retryable=True)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a tool takes")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is too large a number")
    return value


def _non_finite(value: Any, where: str = "arguments") -> str | None:
    """Where a validated argument holds NaN or an infinity (a string "NaN" makes one):
    compared with a payment threshold, it would slip past it or fail the run."""
    if isinstance(value, float | Decimal):
        return None if math.isfinite(value) else where
    if isinstance(value, dict):
        items: list[tuple[str, Any]] = [(f"{where}.{k}", v) for k, v in value.items()]
    elif isinstance(value, list | tuple):
        items = [(f"{where}.{i}", v) for i, v in enumerate(value)]
    else:
        return None
    for path, item in items:
        if (found := _non_finite(item, path)) is not None:
            return found
    return None


def _describe(err: Exception) -> str:
    if isinstance(err, ValidationError):
        parts = []
        for e in err.errors(include_url=False):
            where = ".".join(str(p) for p in e["loc"]) or "arguments"
            parts.append(f"{where}: {e['msg']}")
        return "; ".join(parts)
    return str(err)


def _failure_reason(err: BaseException) -> str:
    """The activity's own failure message: the one our activities word for a person."""
    if isinstance(err, ActivityError) and err.cause is not None:
        cause = err.cause
        return preview(getattr(cause, "message", None) or str(cause), 500)
    return preview(str(err), 500)
