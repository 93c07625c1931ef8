"""A new run's agent, recorded at its start (a fresh start, a cron or retry run, a
shadow, a Schedule's run, a sub-agent, a `run_agent` child): the agent as this worker
has it, the request's policy, budget and limits only where they tighten the agent's
(floors), its MCP servers' tools, and its memory namespace (with the subject grant a
deployment with AGENT_SUBJECT_KEYS asks for)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows import patches
    from durable_agents.workflows.activity_io import SignatureClaim
    from durable_agents.workflows.activity_options import (
        CLAIM_SIGNATURE,
        LIST_MCP_TOOLS,
        RESOLVE_AGENT,
    )
    from durable_agents.workflows.agent_records import (
        AdoptedAgent,
        MCPListing,
        MCPListRequest,
        ToolRecord,
    )
    from durable_agents.workflows.agents import BEFORE_AGENTS
    from durable_agents.workflows.contract_base import preview
    from durable_agents.workflows.contracts import RunLimits, RunRequest
    from durable_agents.workflows.event_kinds import EventKind
    from durable_agents.workflows.floors import (
        FloorLoosened,
        budget_within,
        limits_within,
        tighter_budget,
    )
    from durable_agents.workflows.memory import MemoryDeclarationError, resolve_namespace
    from durable_agents.workflows.policy import loosening, policy_floor
    from durable_agents.workflows.subject_grants import grant_error
    from durable_agents.workflows.tools import INTERNAL_TOOLS

from durable_agents.workflows.beginnings.scheduled import started_by_schedule
from durable_agents.workflows.beginnings.start import Start
from durable_agents.workflows.phases.activity_call import call_activity
from durable_agents.workflows.phases.context import RunFailed


async def agent_recorded(run: Start, request: RunRequest) -> None:
    """A new run records its agent and settles its memory, once: a run from before agents
    were recorded at start (no `AGENT_RECORD` marker) records it later, as it did."""
    if not run.agent_recorded() and run.ctx.opening_patched(patches.AGENT_RECORD):
        run.ctx.moment(EventKind.STARTED, f"agent {request.agent or BEFORE_AGENTS}")
        await adopt_agent(run, request)
        await settle_memory(run, request)


async def adopt_agent(run: Start, request: RunRequest) -> None:
    """Record the agent this run may use, through a local activity so the record is in
    the history (a replay on changed code reads it back); its defaults fill what the
    request left out. A worker without the agent fails the task here, not the run."""
    name = request.agent or BEFORE_AGENTS
    run.ctx.registry().agent(name)
    # Asked before the local activity, in the start's own task: asked after it, a
    # replay meets the marker in a task it has not reached yet (nondeterminism).
    floor = request.policy is not None and workflow.patched(patches.POLICY_FLOOR)
    asks_figures = request.budget is not None or request.limits is not None
    figures_floor = asks_figures and workflow.patched(patches.LIMITS_FLOOR)
    adopted = await call_activity(
        RESOLVE_AGENT, name, result=AdoptedAgent, summary=f"agent: {name}", local=True
    )
    _hold_to_registry(run, name, adopted)
    run.terms.record_agent(adopted.record)
    if figures_floor:
        _settle_figures(run, request, adopted)
    else:
        if request.limits is None and adopted.limits is not None:
            run.terms.adopt(limits=adopted.limits)
        if request.budget is None and adopted.budget is not None:
            run.book.set_budget(adopted.budget)
    _settle_policy(run, request, adopted, floor)
    run.signatures.take_revoked(adopted.revoked_keys)
    run.subject_keys = adopted.subject_keys
    run.ctx.settle_signatures()
    for server in adopted.mcp_servers:
        await _list_mcp_tools(run, server)


def _hold_to_registry(run: Start, name: str, adopted: AdoptedAgent) -> None:
    """The agent as its recorded marker says: a sealed marker copied from another run's
    history (from before a policy was tightened, say) must not loosen the agent as this
    worker has it."""
    declared = run.ctx.registry().agent(name).adopted()
    floor = policy_floor(declared.policy, declared.tool_approvers)
    recorded = policy_floor(adopted.policy, adopted.tool_approvers)
    error = loosening(recorded, floor)
    if error is not None:
        raise ApplicationError(
            f"refused: the recorded agent {name!r}: {error}",
            type="StartRefused",
            non_retryable=True,
        )


def _settle_figures(run: Start, request: RunRequest, adopted: AdoptedAgent) -> None:
    """The agent's budget and limits, or the request's where they only tighten them
    (workflows/floors.py); a sub-agent takes the tighter of its parent's and its own."""
    if from_parent(request):
        run.book.set_budget(tighter_budget(request.budget, adopted.budget))
        run.terms.adopt(limits=limits_within(None, adopted.limits))
        return
    try:
        run.book.set_budget(budget_within(request.budget, adopted.budget))
        run.terms.adopt(limits=limits_within(request.limits, adopted.limits) or RunLimits())
    except FloorLoosened as err:
        run.ctx.fail(RunFailed(f"refused: {err}"))


def _settle_policy(run: Start, request: RunRequest, adopted: AdoptedAgent, is_floor: bool) -> None:
    """The agent's policy, or the request's where it only tightens it: a request that
    loosens it (fewer approvals, other approvers, signing off, keys the agent does not
    trust) fails the run before any activity has run."""
    floor = policy_floor(adopted.policy, adopted.tool_approvers)
    if request.policy is None:
        run.terms.adopt(policy=floor)
        return
    if not is_floor:
        # Runs from before the floor: the policy as the request gave it.
        run.terms.take_tool_approvers(adopted.tool_approvers)
        return
    # A sub-agent too: what its parent hands it only narrows its own agent's floor
    # (the parent hands its policy narrowed to it, workflows/policy.py `narrowed`).
    error = loosening(request.policy, floor, decided_by_record=request.shadow is not None)
    if error is not None:
        run.ctx.fail(RunFailed(f"refused: {error}"))
    run.terms.take_tool_approvers(floor.approvers)


async def _list_mcp_tools(run: Start, server: str) -> None:
    """Read an MCP server's tool list once, in an activity: the history keeps it, so a
    replay sees the tools the run started with, whatever the server lists later."""
    asked = MCPListRequest(run_id=run.origin.store_key, agent=run.ctx.agent.name, server=server)
    listing = await call_activity(
        LIST_MCP_TOOLS, asked, result=MCPListing, summary=f"mcp: list {server}"
    )
    taken = {t.name for t in run.ctx.agent.tools}
    for spec in listing.tools:
        if spec.name in taken or spec.name in INTERNAL_TOOLS:
            listing.skipped.append(f"{spec.name}: another tool has that name")
            continue
        taken.add(spec.name)
        run.terms.add_tool(
            ToolRecord(
                name=spec.name,
                risk=spec.risk,
                schema_digest=spec.schema_digest,
                mcp=server,
                mcp_name=spec.mcp_name,
            )
        )
    names = ", ".join(f"{t.name} ({t.risk.value})" for t in listing.tools) or "none"
    run.audit_log.log(workflow.now(), "system", "mcp_tools", preview(f"{server}: {names}", 500))
    for skipped in listing.skipped:
        run.audit_log.log(workflow.now(), "system", "mcp_tool_skipped", preview(skipped, 300))


async def settle_memory(run: Start, request: RunRequest) -> None:
    """A fresh run of an agent with memory: its namespace, from the run's subject, or
    the one its parent shares (a fork keeps its parent's, a continued run its own)."""
    if request.memory_namespace is not None and not from_parent(request):
        run.ctx.fail(RunFailed("a memory namespace is given only by the run that delegates"))
    memory = run.ctx.agent.memory  # as recorded: code changed later changes nothing here
    if memory is None or run.terms.memory_namespace is not None:
        return
    if request.memory_namespace is not None:
        run.terms.take_memory(request.memory_namespace)
        return
    try:
        run.terms.take_memory(
            resolve_namespace(memory.namespace, memory.optional, run.terms.subject or {})
        )
    except MemoryDeclarationError as err:
        run.ctx.fail(RunFailed(str(err)))
    if run.terms.memory_namespace is not None and run.subject_keys and not run.origin.shadow:
        await _check_subject_grant(run, request, run.terms.memory_namespace)


async def _check_subject_grant(run: Start, request: RunRequest, namespace: str) -> None:
    """Where the deployment says who may start a run about whom (AGENT_SUBJECT_KEYS),
    a run about a subject nobody granted fails before its memory is touched. A grant
    made for a Schedule's runs counts once the Schedule says it started this one."""
    info = workflow.info()
    scheduled = await started_by_schedule(request.subject_grant)
    error = grant_error(
        request.subject_grant,
        subject=request.subject,
        namespace=namespace,
        keys=run.subject_keys,
        run_id=info.workflow_id,
        scheduled_by=scheduled,
        now=workflow.now(),
        delegated_by=request.delegated_by.run_id
        if request.delegated_by is not None and from_parent(request)
        else None,
    )
    if error is not None:
        run.ctx.fail(RunFailed(f"refused: {error}"))
    grant = request.subject_grant
    if grant is not None and grant.run == info.workflow_id:
        # Named for this workflow id alone: one run under it, not another started
        # later under the same id with the grant copied from this one's history.
        claim = SignatureClaim(
            nonce=grant.request_id, run_id=run.origin.store_key, what="subject grant"
        )
        try:
            await call_activity(
                CLAIM_SIGNATURE,
                claim,
                summary="subject: take the grant",
                cancellation_fails=True,  # a grant not taken: the run fails, as it did
            )
        except ActivityError as err:
            run.ctx.fail(RunFailed(getattr(err.cause, "message", None) or str(err.cause)))


def from_parent(request: RunRequest) -> bool:
    """Whether this run is the child workflow of the run its request names."""
    parent = workflow.info().parent
    delegated = request.delegated_by
    return parent is not None and delegated is not None and parent.workflow_id == delegated.run_id
