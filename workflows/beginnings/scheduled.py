"""A Schedule's run: admitted as a fresh start is; what it may take besides is a subject
grant made for the Schedule, counted once the Schedule's own record shows it started
this run (`started_by_schedule`, asked where the run's memory is settled: adopting.py)."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows.activity_io import ScheduledRun
    from durable_agents.workflows.activity_options import SCHEDULED_RUN
    from durable_agents.workflows.people_inputs import SignedDecision
    from durable_agents.workflows.subject_grants import SCHEDULE_PREFIX

from durable_agents.workflows.phases.activity_call import call_activity


async def started_by_schedule(grant: SignedDecision | None) -> str | None:
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
