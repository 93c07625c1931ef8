"""The run's state: `RunState` (run_state.py), its fields (fields.py) and the twelve
records that own them (one file each here), and what touches several records at once.
What queries answer is workflows/run_summary.py; the packed form, workflows/packing.py
(both re-exported here for the workflow's own imports)."""

from __future__ import annotations

import json
from datetime import datetime

from durable_agents.workflows.contract_base import preview
from durable_agents.workflows.contracts import RunRequest
from durable_agents.workflows.packing import MAX_PACKED_STATE_CHARS as MAX_PACKED_STATE_CHARS
from durable_agents.workflows.packing import inflate
from durable_agents.workflows.packing import packed_by as packed_by
from durable_agents.workflows.people_inputs import StatePatch
from durable_agents.workflows.run_summary import EventPage as EventPage
from durable_agents.workflows.run_summary import RunSummary as RunSummary
from durable_agents.workflows.run_summary import event_page as event_page
from durable_agents.workflows.run_summary import for_readers as for_readers
from durable_agents.workflows.state.record import StateWriteRefused as StateWriteRefused
from durable_agents.workflows.state.run_state import RunState as RunState

# What a conversation's state keeps of each growing record across a continue-as-new.
LONG_LIFE_KEPT = 200


def patch_error(state: RunState, patch: StatePatch) -> str | None:
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
    """Apply an edit that patch_error() accepted; returns what changed, for the model."""
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


def unpack_state(packed: str) -> RunState:
    """A state packed by packing.pack_state, inflated only up to its bound."""
    return RunState.model_validate_json(inflate(packed))


def carried_state(request: RunRequest) -> RunState | None:
    """The state a continue-as-new request carries (packed, or whole from older runs);
    None for a request that starts a run afresh."""
    if request.resume_state_packed is not None:
        return unpack_state(request.resume_state_packed)
    if request.resume_state is not None:
        return RunState.model_validate(request.resume_state)
    return None
