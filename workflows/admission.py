"""One admission for every way a run comes about: what a run may take from its start
input is decided here, from Temporal's own record of how it began (its start event, the
chain's previous run, its parent) and never from the input alone.

`ADMISSION` is the table, one row per beginning; docs/architecture.md holds the same
table (tests/workflows/test_admission_table.py holds the two equal, and walks every row
with a hostile start). Anything the admission cannot show is a refusal: a parent or an
earlier run Temporal no longer knows is never taken as "checked back then".

Order: what the start event alone shows (the run's id, a carried state where no
continue-as-new began the run, a carried state's size) is checked before the carried
state is inflated (`before_parsing`); then, before the run does anything,
`RUN_ORIGIN` asks Temporal's record and `refusal` decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows.activity_io import OtherRun, RunOrigin
    from durable_agents.workflows.contract_base import RUN_ID_PATTERN, preview
    from durable_agents.workflows.contracts import RunRequest
    from durable_agents.workflows.records import IDENTITY_SEPARATOR
    from durable_agents.workflows.state import MAX_PACKED_STATE_CHARS, packed_by
    from durable_agents.workflows.state.origin import Origin
    from durable_agents.workflows.subject_grants import SCHEDULE_PREFIX

AGENT_WORKFLOW = "AgentWorkflow"
# Temporal's retention removed what a run needs shown: what an operator does about it.
RETENTION_ADVICE = (
    "if Temporal's retention removed it, fork this run from its last moment "
    "(agentctl fork) and raise the namespace's retention above the longest a run waits"
)


class Beginning(StrEnum):
    """The ways a run of ours comes about."""

    FRESH = "fresh start"
    CONTINUED = "continue-as-new"
    CRON = "cron run"
    RETRY = "retry run"
    CHILD = "sub-agent"
    RUN_AGENT = "run_agent"
    FORK = "fork"
    SHADOW = "what-if shadow"
    SCHEDULED = "Schedule's run"


@dataclass(frozen=True)
class Rule:
    """What a run that began this way may take from its input, and what shows it."""

    trusts: str
    shown_by: str


# The admission table (docs/architecture.md, "Admission", holds the same rows).
ADMISSION: dict[Beginning, Rule] = {
    Beginning.FRESH: Rule(
        "its request, within the agent's policy, budget and limits (floors)",
        "the start event: no carried state, no parent, an id agentctl can show",
    ),
    Beginning.CONTINUED: Rule(
        "the carried state, identity included, sealed with the deployment's key and packed "
        "by the run it continues; its policy within its agent's floor",
        "the previous run's own continue-as-new event names this run and carries this "
        "input; that run is an AgentWorkflow on this queue; the identity is this chain's",
    ),
    Beginning.CRON: Rule(
        "its request as a fresh start; never a carried state",
        "the start event's initiator (cron), read by run_origin",
    ),
    Beginning.RETRY: Rule(
        "its request as a fresh start; never a carried state",
        "the start event's initiator (retry) and attempt",
    ),
    Beginning.CHILD: Rule(
        "the policy (only narrowing its own agent's floor), budget and memory namespace its "
        "parent hands it, sealed with the deployment's key",
        "the parent Temporal records is shown, runs on this queue, and is the run "
        "delegated_by names",
    ),
    Beginning.RUN_AGENT: Rule(
        "its request, within the agent's floors",
        "the parent Temporal records is shown and runs on this queue",
    ),
    Beginning.FORK: Rule(
        "the moment and a signed edit only (an edit only sealed with the deployment's key)",
        "the parent's identity and policy from the parent (fork_origin); the carried "
        "state equals the parent's history rebuilt at that moment (parent_state_at)",
    ),
    Beginning.SHADOW: Rule(
        "the recorded run's decisions",
        "a what-if task queue, and the what-if that started its tree (admits)",
    ),
    Beginning.SCHEDULED: Rule(
        "its request as a fresh start; a subject grant made for the Schedule",
        "the Schedule's own record of starting this run (scheduled_run)",
    ),
}


def beginning_of(request: RunRequest, info: workflow.Info, origin: RunOrigin | None) -> Beginning:
    """How this run came about, from Temporal's record (the start event, `origin`)."""
    if info.continued_run_id is not None:
        # The initiator Temporal recorded, where it recorded one (the time-skipping server
        # leaves it unset); else the attempt. A state is carried only by a continuation:
        # whether it is one is the previous run's own record (`refusal`).
        initiator = origin.initiator if origin is not None else "unknown"
        if initiator == "retry" or (initiator == "unknown" and info.attempt > 1):
            return Beginning.RETRY
        if initiator == "cron" or not request.resumes:
            return Beginning.CRON
        return Beginning.CONTINUED
    if info.parent is not None:
        return Beginning.CHILD if request.delegated_by is not None else Beginning.RUN_AGENT
    if request.fork is not None:
        return Beginning.FORK
    if request.shadow is not None:
        return Beginning.SHADOW
    if request.subject_grant is not None and request.subject_grant.run.startswith(SCHEDULE_PREFIX):
        return Beginning.SCHEDULED
    return Beginning.FRESH


def handed_on(request: RunRequest) -> str | None:
    """What the start hands the run that the run cannot re-derive from its own agent, and
    that only the deployment itself may hand it (None: nothing of the kind)."""
    if request.resumes:
        return "a carried state (a continuation's)"
    if request.delegated_by is not None:
        return "a sub-agent's terms (delegated_by)"
    if request.fork is not None and request.fork.edit is not None:
        return "a fork's edit"
    return None


def before_parsing(request: RunRequest, info: workflow.Info, trusts_the_clear: bool) -> str | None:
    """Why the start event alone refuses the run, before any carried state is inflated.
    `trusts_the_clear`: the worker takes unsealed hand-offs as the deployment's own (it
    holds no keys and was told nobody else polls its namespace: workflows/registry.py)."""
    if not re.fullmatch(RUN_ID_PATTERN, info.workflow_id):
        return (
            f"refused: run id {preview(info.workflow_id, 80)!r} is not one agentctl and the "
            "console can show: use letters, digits and . _ : - (at most 200)"
        )
    handed = handed_on(request)
    if handed is not None and not (request.sealed or trusts_the_clear):
        # Whoever polls our queue can write any start, continuation or child: only a
        # process holding the deployment's key can seal one.
        return f"refused: {handed} is taken only sealed with the deployment's key"
    if not request.resumes:
        return None
    if info.continued_run_id is None:
        return "refused: a start request may not carry a run's state (resume_state)"
    if info.attempt > 1:
        return "refused: a retry run is never a continuation: it may not carry a run's state"
    packed = request.resume_state_packed
    if packed is not None and len(packed) > MAX_PACKED_STATE_CHARS:
        return f"refused: the carried state is over {MAX_PACKED_STATE_CHARS} characters"
    packer = packed_by(packed) if packed is not None else None
    if packer is not None and packer != info.continued_run_id:
        # A sealed state of this chain's past, copied into a later continuation: it would
        # roll the run back (its spend, its decisions).
        return (
            f"refused: the carried state was packed by run {preview(packer, 60)}, not by "
            f"run {info.continued_run_id} that this one continues"
        )
    return None


def asks_the_record(request: RunRequest, info: workflow.Info) -> bool:
    """Whether the run's beginning is shown only by Temporal's record of other runs."""
    return (info.continued_run_id is not None and request.resumes) or info.parent is not None


def refusal(
    request: RunRequest, info: workflow.Info, origin: RunOrigin, carried: Origin
) -> str | None:
    """Why the record refuses this run (one line), or None: `carried` is the state the
    run was built from (a continuation's carried one, else its fresh one)."""
    beginning = beginning_of(request, info, origin)
    if request.resumes and beginning is not Beginning.CONTINUED:
        return f"refused: a {beginning.value} is never a continuation: it may not carry a state"
    if beginning is Beginning.CONTINUED:
        return _continuation_refused(info, origin, carried)
    if beginning in (Beginning.CHILD, Beginning.RUN_AGENT):
        refused = _parent_refused(info, origin.parent)
        parent = origin.parent
        # Only an agent run delegates: a workflow of another type reusing a closed parent's
        # id would hand on that parent's sealed terms.
        typed = refused is None and beginning is Beginning.CHILD and parent is not None
        if typed and parent is not None and parent.workflow_type != AGENT_WORKFLOW:
            return f"refused: delegated to by a {parent.workflow_type}, not by an agent run"
        return refused
    return None


def _continuation_refused(info: workflow.Info, origin: RunOrigin, carried: Origin) -> str | None:
    previous = origin.previous
    named = f"run {info.continued_run_id}"
    if previous is None or not previous.found:
        return f"refused: the run this one continues ({named}) cannot be shown: {RETENTION_ADVICE}"
    if previous.workflow_type != AGENT_WORKFLOW or not previous.on_this_queue:
        return (
            f"refused: continued from a {previous.workflow_type} on {previous.task_queue!r}, "
            "not from a run of this deployment"
        )
    if not origin.continued_into_this:
        return f"refused: {named} did not continue as new into this run with this input"
    if carried.run_id != info.workflow_id or carried.identity != own_identity(info):
        return "refused: the carried state belongs to another run"
    return None


def _parent_refused(info: workflow.Info, parent: OtherRun | None) -> str | None:
    assert info.parent is not None
    named = f"{info.parent.workflow_id} ({info.parent.run_id})"
    if parent is None or not parent.found:
        return (
            f"refused: the run that started this one, {named}, cannot be shown: {RETENTION_ADVICE}"
        )
    if not parent.on_this_queue:
        return (
            f"refused: started by a {parent.workflow_type} on {parent.task_queue!r}, not by a "
            "run of this deployment"
        )
    return None


def own_identity(info: workflow.Info) -> str:
    """Who owns a run's stored data: the workflow id with the first execution's run id,
    which continue-as-new and reset keep and a reused workflow id does not (invariant 9)."""
    return f"{info.workflow_id}{IDENTITY_SEPARATOR}{info.first_execution_run_id}"
