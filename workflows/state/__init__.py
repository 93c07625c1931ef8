"""The run's state: `RunState` (run_state.py: its fields in fields.py, and the twelve
records that own them, one file each here), and what is made of it whole: a person's
edit, which touches several records; a fork's start, to which each record gives its
share; a conversation's trim before it continues; what queries answer (RunSummary,
EventPage); and the packed form continue-as-new carries.
"""

from __future__ import annotations

import base64
import json
import zlib
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, Field

from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import (
    DelegatedBy,
    RunBudget,
    RunRequest,
    Spend,
)
from durable_agents.workflows.people_inputs import StatePatch
from durable_agents.workflows.records import (
    ApprovalRequest,
    Delegation,
    ForkOrigin,
    Question,
    RunEvent,
    RunStatus,
    Usage,
)
from durable_agents.workflows.state.record import StateWriteRefused as StateWriteRefused
from durable_agents.workflows.state.run_state import RunState as RunState

# What a conversation's state keeps of each growing record across a continue-as-new.
LONG_LIFE_KEPT = 200


def patch_error(state: RunState, patch: StatePatch) -> str | None:
    """Why a person's edit cannot apply now; None when it can."""
    if state.status.is_closed:
        return f"the run is {state.status.value}; a closed run cannot be edited"
    if not patch.changes():
        return "the patch changes nothing: give goal, pending_steps or context"
    if patch.pending_steps is not None and state.conversation is not None:
        return "a conversation's steps are its turns: send a message instead"
    if patch.pending_steps is not None and not state.plan:
        return "the run has no plan yet; edit the steps once it has one"
    return None


def apply_patch(state: RunState, patch: StatePatch, now: datetime) -> list[str]:
    """Apply an edit that patch_error() accepted, each part by its record; returns what
    changed, for the model."""
    changed: list[str] = []
    if patch.goal is not None:
        state.terms.set_goal(patch.goal)
        changed.append(f"the goal is now: {patch.goal}")
    if patch.pending_steps is not None:
        state.steps.replace_pending(patch.pending_steps)
        titles = "; ".join(patch.pending_steps) or "(none)"
        changed.append(f"the remaining steps are now: {titles}")
    if patch.context is not None:
        state.steps.replace_context(patch.context)
        changed.append("the gathered context was replaced")
    detail = json.dumps(patch.changes(), sort_keys=True, default=str)
    state.audit_log.log(now, patch.by, "edited", preview(detail, 500))
    state.transcript.note_for_model(f"{patch.by} edited the run: " + "; ".join(changed) + ".")
    return changed


def cancel(state: RunState, now: datetime) -> None:
    """The run ends cancelled: nothing it asked people waits any more."""
    state.requests.close_all(now)
    state.lifecycle.cancel(now)


def event_page(state: RunState, after: int) -> EventPage:
    return EventPage(
        summary=RunSummary.of(state),
        store_key=state.store_key,
        first_kept=state.events[0].offset if state.events else None,
        events=[e for e in state.events if e.offset > after],
    )


def for_readers(state: RunState) -> RunState:
    """The state as a query hands it out: without the spend reports' tokens (a parent
    checks a child's report by it; whoever read it could report for the child). A shallow
    copy: the rest is shared, read-only, with the run."""
    update: dict[str, Any] = {"delegations": [hide_token(d) for d in state.delegations]}
    if state.delegated_by is not None:
        update["delegated_by"] = hide_token(state.delegated_by)
    return state.model_copy(update=update)


def forked(state: RunState, run_id: str, parent_run_id: str, now: datetime) -> RunState:
    """The state as the start of a new run: the phase in progress at this moment (the
    plan, a step, or the final answer) starts over; everything before it is kept, so
    effects before it are not repeated, and from it on the new run has its own keys. Each
    record says what of its own a fork keeps."""
    fork = state.model_copy(deep=True)
    fork.origin.forked(run_id, parent_run_id, state.moment, now)
    fork.transcript.forked()
    restarting = fork.steps.forked()
    fork.outcomes.forked(restarting)
    fork.requests.forked(restarting)
    fork.budget_book.forked()
    fork.signatures.forked()
    fork.moments.forked()
    fork.lifecycle.forked()
    fork.audit_log.log(now, "system", "forked", f"from {parent_run_id} at moment {state.moment}")
    return fork


def trim_for_a_long_life(state: RunState, kept: int = LONG_LIFE_KEPT) -> None:
    """Before a conversation continues as new: the records that grow with every turn keep
    their latest `kept` (those still pending all), so the state it carries stays bounded
    over weeks; the earlier runs' histories keep the rest."""
    state.requests.trim(kept)
    state.budget_book.trim(kept)
    state.audit_log.trim(kept)
    state.lifecycle.trim(kept)


class RunSummary(BaseModel):
    # Written only by the deployment's own runs: a worker holding keys refuses one that
    # came in the clear (runtime/refused_payloads.py): a poller of our queue may answer a
    # query or complete a run, but cannot seal what it says.
    DEPLOYMENT_ONLY: ClassVar[bool] = True

    run_id: str
    goal: str
    status: RunStatus
    progress: str
    steps_total: int
    steps_done: int
    current_step: int | None
    waiting_for: str
    pending_approvals: list[ApprovalRequest]
    pending_questions: list[Question]
    usage: Usage
    final_answer: str | None
    errors: list[str]
    output: dict[str, Any] | None = None
    parent: ForkOrigin | None = None
    agent: str | None = None
    label: str | None = None
    moment: int = 0
    budget: RunBudget | None = None
    spent: Spend | None = None
    delegated_by: DelegatedBy | None = None
    delegations: list[Delegation] = Field(default_factory=list)

    @classmethod
    def of(cls, state: RunState) -> RunSummary:
        return cls(
            run_id=state.run_id,
            agent=state.agent.name if state.agent else None,
            label=state.label,
            moment=state.moment,
            goal=state.goal,
            status=state.status,
            progress=state.progress_line(),
            steps_total=len(state.plan),
            steps_done=len(state.steps.completed),
            current_step=state.current_step,
            waiting_for=state.waiting_for,
            pending_approvals=state.pending_approvals,
            pending_questions=state.pending_questions,
            usage=state.usage,
            final_answer=state.final_answer,
            output=state.output,
            errors=state.errors,
            parent=state.parent,
            budget=state.budget,
            spent=state.spent,
            delegated_by=hide_token(state.delegated_by) if state.delegated_by else None,
            delegations=[hide_token(d) for d in state.delegations],
        )


class EventPage(BaseModel):
    """The answer of the `events` query: the events after an offset, and where the run is."""

    summary: RunSummary
    store_key: str  # where the run's transcript texts are (the previews' source)
    first_kept: int | None  # the oldest offset still held in the state (None: none yet)
    events: list[RunEvent]


def pack_state(state: RunState, by_run: str | None = None) -> str:
    """The state a continue-as-new carries, compressed: it is written twice (the
    continue-as-new event and the next run's start), and a long plan of step titles and
    results shrinks several times over. `by_run`: the Temporal run that packs it, named
    in front (the next run checks it is the one it continues: workflows/admission.py)."""
    packed = base64.b64encode(zlib.compress(state.model_dump_json().encode(), 6)).decode()
    return packed if by_run is None else f"{by_run}{PACKER_SEPARATOR}{packed}"


# Between the packing run's id and the packed state: never a base64 character.
PACKER_SEPARATOR = "."


def packed_by(packed: str) -> str | None:
    """The run that packed a carried state (None: packed before runs named themselves)."""
    packer, sep, _ = packed.partition(PACKER_SEPARATOR)
    return packer if sep else None


# A carried state inflates to at most this (a state that large is far past what a run
# keeps: its lists are capped), and its packed form is at most this long: a start input
# that inflates without bound never takes the worker's memory (the admission refuses it).
MAX_STATE_BYTES = 32 * 1024 * 1024
MAX_PACKED_STATE_CHARS = 4 * 1024 * 1024


class StateTooLarge(ValueError):
    """A carried state that would inflate past MAX_STATE_BYTES."""


def unpack_state(packed: str) -> RunState:
    """The carried state, inflated only up to MAX_STATE_BYTES."""
    packed = packed.rpartition(PACKER_SEPARATOR)[2]
    inflater = zlib.decompressobj()
    raw = inflater.decompress(base64.b64decode(packed, validate=True), MAX_STATE_BYTES)
    if inflater.unconsumed_tail:
        raise StateTooLarge(f"the carried state inflates past {MAX_STATE_BYTES} bytes")
    if not inflater.eof:
        raise ValueError("the carried state is cut short")
    return RunState.model_validate_json(raw)


def carried_state(request: RunRequest) -> RunState | None:
    """The state a continue-as-new request carries (packed, or whole from older runs);
    None for a request that starts a run afresh."""
    if request.resume_state_packed is not None:
        return unpack_state(request.resume_state_packed)
    if request.resume_state is not None:
        return RunState.model_validate(request.resume_state)
    return None


TokenHolder = TypeVar("TokenHolder", Delegation, DelegatedBy)


def hide_token(held: TokenHolder) -> TokenHolder:
    """A delegation (or a child's link to its parent) without its spend-report token."""
    return held if held.report_token is None else held.model_copy(update={"report_token": None})
