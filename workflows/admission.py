"""One admission for every way a run comes about: what a run may take from its start
input is decided here, from Temporal's own record of how it began (its start event, the
chain's previous run, its parent) and never from the input alone.

`ADMISSION` is the table, one row per `Beginning`: what a run begun that way may take,
what shows it, and the check that admits it (workflows/beginnings/, one module per
beginning), as LIMIT_FLOORS drives workflows/floors.py. docs/reference/admission.md is
printed from its rows (`make docs`); tests/integration/test_admission.py walks every row
with a hostile start. Anything the admission cannot show is a refusal: a parent or an
earlier run Temporal no longer knows is never taken as "checked back then".

Order: what the start event alone shows (the run's id, a carried state where no
continue-as-new began the run, a carried state's size) is checked in __init__, before
the carried state is inflated (`before_parsing`); then `run` asks `begun` once (a start
naming an identity or a parent it does not have is refused, and `RUN_ORIGIN` asks
Temporal's record where only it shows the beginning), and calls that row's check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows import patches
    from durable_agents.workflows.activity_io import RunOrigin
    from durable_agents.workflows.activity_options import RUN_ORIGIN
    from durable_agents.workflows.contract_base import RUN_ID_PATTERN, preview
    from durable_agents.workflows.contracts import RunRequest
    from durable_agents.workflows.state import MAX_PACKED_STATE_CHARS, RunState, packed_by
    from durable_agents.workflows.subject_grants import SCHEDULE_PREFIX

from durable_agents.workflows.beginnings import (
    Beginning as Beginning,  # the table's keys, named from here too
)
from durable_agents.workflows.beginnings import (
    child,
    continued,
    fork,
    fresh,
    own_identity,
)
from durable_agents.workflows.beginnings.start import Begun, Check, asked, refuse


@dataclass(frozen=True)
class Rule:
    """What a run that began this way may take from its input, what shows it, and the
    check that admits it (`AgentWorkflow.run` calls it, and nothing else decides)."""

    trusts: str
    shown_by: str
    admits: Check


# The admission table (docs/reference/admission.md prints its prose).
ADMISSION: dict[Beginning, Rule] = {
    Beginning.FRESH: Rule(
        "its request, within the agent's policy, budget and limits (floors)",
        "the start event: no carried state, no parent, an id agentctl can show",
        fresh.admits,
    ),
    Beginning.CONTINUED: Rule(
        "the carried state, identity included, sealed with the deployment's key and packed "
        "by the run it continues; its policy within its agent's floor",
        "the previous run's own continue-as-new event names this run and carries this "
        "input; that run is an AgentWorkflow on this queue; the identity is this chain's",
        continued.admits,
    ),
    Beginning.CRON: Rule(
        "its request as a fresh start; never a carried state",
        "the start event's initiator (cron), read by run_origin",
        fresh.admits,
    ),
    Beginning.RETRY: Rule(
        "its request as a fresh start; never a carried state",
        "the start event's initiator (retry) and attempt",
        fresh.admits,
    ),
    Beginning.CHILD: Rule(
        "the policy (only narrowing its own agent's floor), budget and memory namespace its "
        "parent hands it, sealed with the deployment's key",
        "the parent Temporal records is shown, runs on this queue, and is the run "
        "delegated_by names",
        child.admits,
    ),
    Beginning.RUN_AGENT: Rule(
        "its request, within the agent's floors",
        "the parent Temporal records is shown and runs on this queue",
        child.admits,
    ),
    Beginning.FORK: Rule(
        "the moment and a signed edit only (an edit only sealed with the deployment's key)",
        "the parent's identity and policy from the parent (fork_origin); the carried "
        "state equals the parent's history rebuilt at that moment (parent_state_at)",
        fork.admits,
    ),
    Beginning.SHADOW: Rule(
        "the recorded run's decisions",
        "a what-if task queue, and the what-if that started its tree (admits)",
        fresh.admits,  # held to a what-if queue as every run is (beginnings/shadow.py)
    ),
    Beginning.SCHEDULED: Rule(
        "its request as a fresh start; a subject grant made for the Schedule",
        "the Schedule's own record of starting this run (scheduled_run)",
        fresh.admits,  # the grant counted where memory is settled (beginnings/scheduled.py)
    ),
}


async def begun(request: RunRequest, state: RunState, info: workflow.Info) -> Begun:
    """How this run began: a start naming an identity or a parent Temporal says it does
    not have is refused before anything is written; Temporal's record (`RUN_ORIGIN`) is
    asked where only it shows the beginning (a continuation, a child)."""
    if (forged := forged_start(request, state, info)) is not None:
        # Before anything is written: a caller never chooses a run's identity.
        refuse(forged)
    record = None
    if asks_the_record(request, info) and workflow.patched(patches.ADMITTED):
        record = await asked(RUN_ORIGIN, "", RunOrigin, "admission: how this run began")
    return Begun(request, beginning_of(request, info, record), record)


def beginning_of(request: RunRequest, info: workflow.Info, origin: RunOrigin | None) -> Beginning:
    """How this run came about, from Temporal's record (the start event, `origin`). A run
    whose request forks (and carries no state) is a fork, however it was started: its
    state is the fork's (AgentWorkflow.__init__)."""
    if info.continued_run_id is not None and (request.resumes or request.fork is None):
        # The initiator Temporal recorded, where it recorded one (the time-skipping server
        # leaves it unset); else the attempt. A state is carried only by a continuation:
        # whether it is one is the previous run's own record (beginnings/continued.py).
        initiator = origin.initiator if origin is not None else "unknown"
        if initiator == "retry" or (initiator == "unknown" and info.attempt > 1):
            return Beginning.RETRY
        if initiator == "cron" or not request.resumes:
            return Beginning.CRON
        return Beginning.CONTINUED
    if request.fork is not None:
        return Beginning.FORK
    if info.parent is not None:
        return Beginning.CHILD if request.delegated_by is not None else Beginning.RUN_AGENT
    if request.shadow is not None:
        return Beginning.SHADOW
    if request.subject_grant is not None and request.subject_grant.run.startswith(SCHEDULE_PREFIX):
        return Beginning.SCHEDULED
    return Beginning.FRESH


def asks_the_record(request: RunRequest, info: workflow.Info) -> bool:
    """Whether the run's beginning is shown only by Temporal's record of other runs."""
    return (info.continued_run_id is not None and request.resumes) or info.parent is not None


def forged_start(request: RunRequest, state: RunState, info: workflow.Info) -> str | None:
    """Why a start request may not be taken: carried state or a parent that Temporal says
    this run does not have (a caller would then write under another run's identity)."""
    if request.resumes:  # one no continue-as-new began: refused before parsing
        mine = own_identity(info)
        if state.run_id != info.workflow_id or state.identity not in (None, mine):
            return "refused: the carried state belongs to another run"
    elif request.delegated_by is not None:
        parent = info.parent
        if parent is None or parent.workflow_id != request.delegated_by.run_id:
            return "refused: delegated_by names a run that did not start this one"
    return None


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
