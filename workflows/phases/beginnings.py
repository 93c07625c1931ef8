"""How a run begins: its state is decided before anything else (fresh, carried over a
continue-as-new, or a fork's, `fork_start`); it records its agent (and its MCP servers'
tools) at start, or, as a fork, takes its parent's identity and policy from the parent
itself; and a start request that names another run's identity is refused before
anything is written."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from durable_agents.workflows import admission, patches, signed_changes
    from durable_agents.workflows.activity_io import (
        ParentFacts,
        ParentMoment,
        RunOrigin,
        ScheduledRun,
        SignatureClaim,
        TranscriptCopy,
    )
    from durable_agents.workflows.activity_options import (
        CLAIM_SIGNATURE,
        COPY_TRANSCRIPT,
        FORK_ORIGIN,
        LIST_MCP_TOOLS,
        PARENT_STATE_AT,
        RESOLVE_AGENT,
        RUN_ORIGIN,
        SCHEDULED_RUN,
    )
    from durable_agents.workflows.agent_records import (
        AdoptedAgent,
        MCPListing,
        MCPListRequest,
        ToolRecord,
    )
    from durable_agents.workflows.agents import BEFORE_AGENTS
    from durable_agents.workflows.contract_base import preview
    from durable_agents.workflows.contracts import ForkSpec, RunLimits, RunRequest, SubjectKey
    from durable_agents.workflows.floors import (
        FloorLoosened,
        budget_within,
        limits_within,
        tighter_budget,
    )
    from durable_agents.workflows.memory import MemoryDeclarationError, resolve_namespace
    from durable_agents.workflows.people_inputs import SignedDecision
    from durable_agents.workflows.policy import loosening, policy_floor
    from durable_agents.workflows.records import workflow_id_of
    from durable_agents.workflows.state import RunState, apply_patch, forked, patch_error
    from durable_agents.workflows.state.audit_log import AuditLog
    from durable_agents.workflows.state.budget_book import BudgetBook
    from durable_agents.workflows.state.transcript import Transcript
    from durable_agents.workflows.subject_grants import SCHEDULE_PREFIX, grant_error
    from durable_agents.workflows.tools import (
        INTERNAL_TOOLS,
    )


from durable_agents.workflows.phases.activity_call import call_activity
from durable_agents.workflows.phases.context import Phase, RunContext, RunFailed, failure_reason
from durable_agents.workflows.phases.inputs import describe

Asked = TypeVar("Asked")


@dataclass(frozen=True)
class ForkStart:
    """A fork's start, decided before the run's context exists: the fork's own state
    (None where its starting state was refused, `error`), the state as its request
    carried it (checked against the parent's record) and its parent's store key."""

    state: RunState | None = None
    carried: RunState | None = None
    parent_store_key: str | None = None
    error: str | None = None


def fork_start(fork: ForkSpec, run_id: str, now: datetime) -> ForkStart:
    """The state a fork starts from: its parent's as the request carried it, forked (each
    record says what of its own a fork keeps), with the edit it carries."""
    try:
        parent_state = RunState.model_validate(fork.state)
    except ValidationError as err:
        return ForkStart(error=f"the fork's starting state is invalid: {describe(err)}")
    carried = parent_state.model_copy(deep=True)
    state = forked(parent_state, run_id, fork.parent_run_id, now)
    if fork.edit is not None and patch_error(state, fork.edit) is None:
        apply_patch(state, fork.edit, now)
    return ForkStart(state, carried, parent_state.store_key)


class Beginnings(Phase):
    """How the run begins: its agent recorded, its memory settled, or its fork checked."""

    def __init__(
        self,
        ctx: RunContext,
        fork: ForkStart | None,
        *,
        signing: signed_changes.Signing,
        audit_log: AuditLog,
        book: BudgetBook,
        transcript: Transcript,
    ) -> None:
        super().__init__(ctx)
        # The signed-change check's records (origin, terms, signatures, moments, requests).
        self.signing, self.origin, self.terms = signing, signing.origin, signing.terms
        self.signatures = signing.signatures
        self.audit_log, self.book, self.transcript = audit_log, book, transcript
        fork = fork or ForkStart()
        # A fork's start: why its starting state was refused, and its parent's store key.
        self.fork_error = fork.error
        self.parent_store_key = fork.parent_store_key
        # A fork's state as its request carried it (checked against the parent's record).
        self._carried = fork.carried
        # Keys that grant subjects, as the agent record brought them (AGENT_SUBJECT_KEYS).
        self._subject_keys: dict[str, SubjectKey] = {}

    async def admit(self, request: RunRequest) -> None:
        """The admission's record check (workflows/admission.py): how the run began, as
        Temporal's record shows it; what cannot be shown refuses the run."""
        origin = await asked(RUN_ORIGIN, "", RunOrigin, "admission: how this run began")
        refused = admission.refusal(request, workflow.info(), origin, self.origin)
        if refused is not None:
            raise ApplicationError(refused, type="StartRefused", non_retryable=True)

    def hold_carried_to_floor(self) -> None:
        """A continuation's carried policy, held to its agent's floor as this worker has
        the agent (the same rule as a start's and a sub-agent's, `_settle_policy`): a
        carried state that loosens it was not made by this deployment's runs."""
        declared = self.ctx.registry().agent(self.ctx.agent.name).adopted()
        floor = policy_floor(declared.policy, declared.tool_approvers)
        error = loosening(
            self.terms.policy, floor, decided_by_record=self.origin.shadow is not None
        )
        if error is not None:
            raise ApplicationError(
                f"refused: the carried state: {error}", type="StartRefused", non_retryable=True
            )

    async def settle_memory(self, request: RunRequest) -> None:
        """A fresh run of an agent with memory: its namespace, from the run's subject, or
        the one its parent shares (a fork keeps its parent's, a continued run its own)."""
        if request.memory_namespace is not None and not self._from_parent(request):
            self.ctx.fail(RunFailed("a memory namespace is given only by the run that delegates"))
        memory = self.ctx.agent.memory  # as recorded: code changed later changes nothing here
        if memory is None or self.terms.memory_namespace is not None:
            return
        if request.memory_namespace is not None:
            self.terms.take_memory(request.memory_namespace)
            return
        try:
            self.terms.take_memory(
                resolve_namespace(memory.namespace, memory.optional, self.terms.subject or {})
            )
        except MemoryDeclarationError as err:
            self.ctx.fail(RunFailed(str(err)))
        if (
            self.terms.memory_namespace is not None
            and self._subject_keys
            and not self.origin.shadow
        ):
            await self._check_subject_grant(request, self.terms.memory_namespace)

    async def _check_subject_grant(self, request: RunRequest, namespace: str) -> None:
        """Where the deployment says who may start a run about whom (AGENT_SUBJECT_KEYS),
        a run about a subject nobody granted fails before its memory is touched. A grant
        made for a Schedule's runs counts once the Schedule says it started this one."""
        info = workflow.info()
        scheduled = await self._started_by_schedule(request.subject_grant)
        error = grant_error(
            request.subject_grant,
            subject=request.subject,
            namespace=namespace,
            keys=self._subject_keys,
            run_id=info.workflow_id,
            scheduled_by=scheduled,
            now=workflow.now(),
            delegated_by=request.delegated_by.run_id
            if request.delegated_by is not None and self._from_parent(request)
            else None,
        )
        if error is not None:
            self.ctx.fail(RunFailed(f"refused: {error}"))
        grant = request.subject_grant
        if grant is not None and grant.run == info.workflow_id:
            # Named for this workflow id alone: one run under it, not another started
            # later under the same id with the grant copied from this one's history.
            claim = SignatureClaim(
                nonce=grant.request_id, run_id=self.origin.store_key, what="subject grant"
            )
            try:
                await call_activity(
                    CLAIM_SIGNATURE,
                    claim,
                    summary="subject: take the grant",
                    cancellation_fails=True,  # a grant not taken: the run fails, as it did
                )
            except ActivityError as err:
                self.ctx.fail(RunFailed(getattr(err.cause, "message", None) or str(err.cause)))

    async def _started_by_schedule(self, grant: SignedDecision | None) -> str | None:
        """The Schedule a grant names, when that Schedule itself recorded starting this run
        (the search attribute that says so can be set by any starter)."""
        if grant is None or not grant.run.startswith(SCHEDULE_PREFIX):
            return None
        info, schedule_id = workflow.info(), grant.run.removeprefix(SCHEDULE_PREFIX)
        asked = ScheduledRun(
            schedule_id=schedule_id,
            workflow_id=info.workflow_id,
            first_run_id=info.first_execution_run_id,
        )
        try:
            started = await call_activity(
                SCHEDULED_RUN,
                asked,
                result=bool,
                summary=f"subject: ask schedule {schedule_id}",
                cancellation_fails=True,  # no answer: not started by it, as it was
            )
        except ActivityError:
            return None
        return schedule_id if started else None

    @staticmethod
    def _from_parent(request: RunRequest) -> bool:
        """Whether this run is the child workflow of the run its request names."""
        parent = workflow.info().parent
        delegated = request.delegated_by
        return (
            parent is not None and delegated is not None and parent.workflow_id == delegated.run_id
        )

    async def adopt_agent(self, request: RunRequest) -> None:
        """Record the agent this run may use, through a local activity so the record is in
        the history (a replay on changed code reads it back); its defaults fill what the
        request left out. A worker without the agent fails the task here, not the run."""
        name = request.agent or BEFORE_AGENTS
        self.ctx.registry().agent(name)
        # Asked before the local activity, in the start's own task: asked after it, a
        # replay meets the marker in a task it has not reached yet (nondeterminism).
        floor = request.policy is not None and workflow.patched(patches.POLICY_FLOOR)
        asks_figures = request.budget is not None or request.limits is not None
        figures_floor = asks_figures and workflow.patched(patches.LIMITS_FLOOR)
        adopted = await call_activity(
            RESOLVE_AGENT, name, result=AdoptedAgent, summary=f"agent: {name}", local=True
        )
        self._hold_to_registry(name, adopted)
        self.terms.record_agent(adopted.record)
        if figures_floor:
            self._settle_figures(request, adopted)
        else:
            if request.limits is None and adopted.limits is not None:
                self.terms.adopt(limits=adopted.limits)
            if request.budget is None and adopted.budget is not None:
                self.book.set_budget(adopted.budget)
        self._settle_policy(request, adopted, floor)
        self.signatures.take_revoked(adopted.revoked_keys)
        self._subject_keys = adopted.subject_keys
        self.ctx.settle_signatures()
        for server in adopted.mcp_servers:
            await self._list_mcp_tools(server)

    def _hold_to_registry(self, name: str, adopted: AdoptedAgent) -> None:
        """The agent as its recorded marker says: a sealed marker copied from another run's
        history (from before a policy was tightened, say) must not loosen the agent as this
        worker has it."""
        declared = self.ctx.registry().agent(name).adopted()
        floor = policy_floor(declared.policy, declared.tool_approvers)
        recorded = policy_floor(adopted.policy, adopted.tool_approvers)
        error = loosening(recorded, floor)
        if error is not None:
            raise ApplicationError(
                f"refused: the recorded agent {name!r}: {error}",
                type="StartRefused",
                non_retryable=True,
            )

    def _settle_figures(self, request: RunRequest, adopted: AdoptedAgent) -> None:
        """The agent's budget and limits, or the request's where they only tighten them
        (workflows/floors.py); a sub-agent takes the tighter of its parent's and its own."""
        if self._from_parent(request):
            self.book.set_budget(tighter_budget(request.budget, adopted.budget))
            self.terms.adopt(limits=limits_within(None, adopted.limits))
            return
        try:
            self.book.set_budget(budget_within(request.budget, adopted.budget))
            self.terms.adopt(limits=limits_within(request.limits, adopted.limits) or RunLimits())
        except FloorLoosened as err:
            self.ctx.fail(RunFailed(f"refused: {err}"))

    def _settle_policy(self, request: RunRequest, adopted: AdoptedAgent, is_floor: bool) -> None:
        """The agent's policy, or the request's where it only tightens it: a request that
        loosens it (fewer approvals, other approvers, signing off, keys the agent does not
        trust) fails the run before any activity has run."""
        floor = policy_floor(adopted.policy, adopted.tool_approvers)
        if request.policy is None:
            self.terms.adopt(policy=floor)
            return
        if not is_floor:
            # Runs from before the floor: the policy as the request gave it.
            self.terms.take_tool_approvers(adopted.tool_approvers)
            return
        # A sub-agent too: what its parent hands it only narrows its own agent's floor
        # (the parent hands its policy narrowed to it, workflows/policy.py `narrowed`).
        error = loosening(request.policy, floor, decided_by_record=request.shadow is not None)
        if error is not None:
            self.ctx.fail(RunFailed(f"refused: {error}"))
        self.terms.take_tool_approvers(floor.approvers)

    async def _list_mcp_tools(self, server: str) -> None:
        """Read an MCP server's tool list once, in an activity: the history keeps it, so a
        replay sees the tools the run started with, whatever the server lists later."""
        asked = MCPListRequest(
            run_id=self.origin.store_key, agent=self.ctx.agent.name, server=server
        )
        listing = await call_activity(
            LIST_MCP_TOOLS, asked, result=MCPListing, summary=f"mcp: list {server}"
        )
        taken = {t.name for t in self.ctx.agent.tools}
        for spec in listing.tools:
            if spec.name in taken or spec.name in INTERNAL_TOOLS:
                listing.skipped.append(f"{spec.name}: another tool has that name")
                continue
            taken.add(spec.name)
            self.terms.add_tool(
                ToolRecord(
                    name=spec.name,
                    risk=spec.risk,
                    schema_digest=spec.schema_digest,
                    mcp=server,
                    mcp_name=spec.mcp_name,
                )
            )
        names = ", ".join(f"{t.name} ({t.risk.value})" for t in listing.tools) or "none"
        self.audit_log.log(
            workflow.now(), "system", "mcp_tools", preview(f"{server}: {names}", 500)
        )
        for skipped in listing.skipped:
            self.audit_log.log(workflow.now(), "system", "mcp_tool_skipped", preview(skipped, 300))

    async def take_parent_facts(self, fork: ForkSpec, checked: bool) -> None:
        """The parent's identity and policy as Temporal has them, not as the fork request
        says: the transcript is copied from the real parent, under the parent's policy; a
        parent requiring signed changes counts only a fork signed for this very fork.
        `checked`: the whole state carried must be the parent's own at the moment."""
        facts = await asked(
            FORK_ORIGIN, fork.parent_run_id, ParentFacts, f"fork: ask {fork.parent_run_id}"
        )
        self.parent_store_key = facts.store_key
        # A fork's memory is its parent's, never one its request names.
        self.terms.take_parents(facts.policy, facts.memory_namespace, facts.subject)
        self.ctx.settle_signatures()
        says = fork.what_it_says(workflow.info().workflow_id)
        by = fork.by or "anonymous"
        error = signed_changes.change_error(
            self.signing, "fork", by, fork.signed, says, workflow.now(), runs=(facts.store_key,)
        )
        if error is not None:
            self.ctx.refuse(by, error)
            self.ctx.fail(RunFailed(f"refused: {error}"))
        if checked:
            await self._check_against_parents_record(fork)
        if fork.by is not None:
            self.audit_log.log(workflow.now(), fork.by, "forked_by", f"from {fork.parent_run_id}")

    async def _check_against_parents_record(self, fork: ForkSpec) -> None:
        """The state the fork carries must be its parent's own at the moment it names, as
        the parent's history has it (rebuilt by replaying it, `parent_state_at`): a caller
        cannot hand a fork another agent record (tools' risks, amounts, MCP names), plan,
        results or decisions. Only the moment and the signed edit are the caller's."""
        assert self.origin.parent is not None and self._carried is not None
        moment = ParentMoment(parent_run_id=fork.parent_run_id, moment=self.origin.parent.moment)
        summary = f"fork: rebuild {fork.parent_run_id} at moment {moment.moment}"
        parent = await asked(PARENT_STATE_AT, moment, RunState, summary)
        differs = first_difference(parent, self._carried)
        if differs is not None:
            self.ctx.fail(
                RunFailed(
                    f"refused: the fork's state is not its parent's at moment {moment.moment} "
                    f"({differs} differs from the parent's record)"
                )
            )

    async def copy_parent_transcript(self, parent_store_key: str, fork: ForkSpec) -> None:
        carried = self._carried
        copy = TranscriptCopy(
            from_run_id=parent_store_key,
            to_run_id=self.origin.store_key,
            before_seq=self.transcript.next_seq,
            signed_nonce=fork.signed.request_id if fork.signed is not None else None,
            # What the parent had written by the fork's moment: a store with less of it
            # copies nothing (the fork would start from half a past).
            rows_written=carried.transcript_rows if carried is not None else None,
        )
        summary = f"fork: copy transcript of {workflow_id_of(parent_store_key)}"
        copied = await call_activity(COPY_TRANSCRIPT, copy, result=int, summary=summary)
        # The fork's own count starts at what the copy put under its key.
        self.transcript.rows_copied(copied if isinstance(copied, int) else None)


async def asked(name: str, arg: Any, result: type[Asked], summary: str) -> Asked:
    """What an activity of the admission shows; one that cannot show it refuses the run
    in its own words (never "checked back then")."""
    try:
        answer: Asked = await call_activity(name, arg, result=result, summary=summary)
    except ActivityError as err:
        why = failure_reason(err)
        if not why.startswith("refused:"):
            why = f"refused: {why}"
        raise ApplicationError(why, type="StartRefused", non_retryable=True) from None
    return answer


def forged_start(request: RunRequest, state: RunState, info: workflow.Info) -> str | None:
    """Why a start request may not be taken: carried state or a parent that Temporal says
    this run does not have (a caller would then write under another run's identity)."""
    if request.resumes:  # one no continue-as-new began: refused before parsing (admission)
        mine = admission.own_identity(info)
        if state.run_id != info.workflow_id or state.identity not in (None, mine):
            return "refused: the carried state belongs to another run"
    elif request.delegated_by is not None:
        parent = info.parent
        if parent is None or parent.workflow_id != request.delegated_by.run_id:
            return "refused: delegated_by names a run that did not start this one"
    return None


def first_difference(ours: RunState, theirs: RunState) -> str | None:
    """The first field (in the state's own order) where two states differ, or None."""
    mine, other = ours.model_dump(mode="json"), theirs.model_dump(mode="json")
    return next((name for name in mine if mine[name] != other.get(name)), None)
