"""A fork: its state is decided in __init__, before the run's context exists
(`fork_start`: its parent's as the request carried it, forked, with its edit); the run
then takes only the moment and a signed edit from its request. The parent's identity and
policy come from the parent itself (`FORK_ORIGIN`), and the state carried must be the
parent's own at that moment, rebuilt from its history (`PARENT_STATE_AT`). A run whose
request forks is a fork however it was started (by a parent too, or as a cron or retry
run)."""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from durable_agents.workflows import patches, signed_changes
    from durable_agents.workflows.activity_io import ParentFacts, ParentMoment, TranscriptCopy
    from durable_agents.workflows.activity_options import (
        COPY_TRANSCRIPT,
        FORK_ORIGIN,
        PARENT_STATE_AT,
    )
    from durable_agents.workflows.contracts import ForkSpec
    from durable_agents.workflows.event_kinds import EventKind
    from durable_agents.workflows.records import workflow_id_of
    from durable_agents.workflows.state import RunState, apply_patch, forked, patch_error

from durable_agents.workflows.beginnings.child import parent_refused
from durable_agents.workflows.beginnings.start import Begun, ForkStart, Start, asked, refuse
from durable_agents.workflows.phases.activity_call import call_activity
from durable_agents.workflows.phases.context import RunFailed
from durable_agents.workflows.phases.inputs import describe


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


async def admits(run: Start, begun: Begun) -> None:
    """Started by a parent, shown by it as a child is (a cron or retry run's parent is not
    asked); opened; then its parent asked, its state checked against the parent's record
    and the parent's transcript copied."""
    info = workflow.info()
    if begun.record is not None and info.continued_run_id is None:
        refused = parent_refused(begun.request, info, begun.record)
        if refused is not None:
            refuse(refused)
    run.opened()
    start, fork = run.fork or ForkStart(), begun.request.fork
    if start.error is not None:
        run.ctx.fail(RunFailed(start.error))
    if fork is None or run.origin.parent is None:
        return
    parent_store_key = start.parent_store_key
    if workflow.patched(patches.FORK_CHECKED):
        checked = workflow.patched(patches.FORK_RECORD_CHECKED)  # asked before any activity
        parent_store_key = await _take_parent_facts(run, fork, checked)
    parent = run.origin.parent
    assert parent is not None
    run.ctx.moment(EventKind.FORKED, f"from {parent.run_id} at {parent.moment}")
    await _copy_parent_transcript(run, parent_store_key or parent.run_id, fork)


async def _take_parent_facts(run: Start, fork: ForkSpec, checked: bool) -> str:
    """The parent's identity and policy as Temporal has them, not as the fork request
    says: the transcript is copied from the real parent, under the parent's policy; a
    parent requiring signed changes counts only a fork signed for this very fork.
    `checked`: the whole state carried must be the parent's own at the moment. Returns
    the parent's store key."""
    facts = await asked(
        FORK_ORIGIN, fork.parent_run_id, ParentFacts, f"fork: ask {fork.parent_run_id}"
    )
    # A fork's memory is its parent's, never one its request names.
    run.terms.take_parents(facts.policy, facts.memory_namespace, facts.subject)
    run.ctx.settle_signatures()
    says = fork.what_it_says(workflow.info().workflow_id)
    by = fork.by or "anonymous"
    error = signed_changes.change_error(
        run.signing, "fork", by, fork.signed, says, workflow.now(), runs=(facts.store_key,)
    )
    if error is not None:
        run.ctx.refuse(by, error)
        run.ctx.fail(RunFailed(f"refused: {error}"))
    if checked:
        await _check_against_parents_record(run, fork)
    if fork.by is not None:
        run.audit_log.log(workflow.now(), fork.by, "forked_by", f"from {fork.parent_run_id}")
    return facts.store_key


async def _check_against_parents_record(run: Start, fork: ForkSpec) -> None:
    """The state the fork carries must be its parent's own at the moment it names, as
    the parent's history has it (rebuilt by replaying it, `parent_state_at`): a caller
    cannot hand a fork another agent record (tools' risks, amounts, MCP names), plan,
    results or decisions. Only the moment and the signed edit are the caller's."""
    carried = run.fork.carried if run.fork is not None else None
    assert run.origin.parent is not None and carried is not None
    moment = ParentMoment(parent_run_id=fork.parent_run_id, moment=run.origin.parent.moment)
    summary = f"fork: rebuild {fork.parent_run_id} at moment {moment.moment}"
    parent = await asked(PARENT_STATE_AT, moment, RunState, summary)
    differs = first_difference(parent, carried)
    if differs is not None:
        run.ctx.fail(
            RunFailed(
                f"refused: the fork's state is not its parent's at moment {moment.moment} "
                f"({differs} differs from the parent's record)"
            )
        )


async def _copy_parent_transcript(run: Start, parent_store_key: str, fork: ForkSpec) -> None:
    carried = run.fork.carried if run.fork is not None else None
    copy = TranscriptCopy(
        from_run_id=parent_store_key,
        to_run_id=run.origin.store_key,
        before_seq=run.transcript.next_seq,
        signed_nonce=fork.signed.request_id if fork.signed is not None else None,
        # What the parent had written by the fork's moment: a store with less of it
        # copies nothing (the fork would start from half a past).
        rows_written=carried.transcript_rows if carried is not None else None,
    )
    summary = f"fork: copy transcript of {workflow_id_of(parent_store_key)}"
    copied = await call_activity(COPY_TRANSCRIPT, copy, result=int, summary=summary)
    # The fork's own count starts at what the copy put under its key.
    run.transcript.rows_copied(copied if isinstance(copied, int) else None)


def first_difference(ours: RunState, theirs: RunState) -> str | None:
    """The first field (in the state's own order) where two states differ, or None."""
    mine, other = ours.model_dump(mode="json"), theirs.model_dump(mode="json")
    return next((name for name in mine if mine[name] != other.get(name)), None)
