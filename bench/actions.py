"""Billable actions in a history, counted by Temporal Cloud's published rules
(https://docs.temporal.io/cloud/actions) as far as a history shows them.

The rule, event by event:
- workflow started: each run's `WorkflowExecutionStarted` (a client start, a
  signal-with-start, a continue-as-new); a child's start is counted once, in its parent's
  `ChildWorkflowExecutionStarted`, so the child's own started event is not counted again;
- activity started or retried: every attempt, which is the `attempt` of the
  `ActivityTaskStarted` event that ended it (Temporal records only the last attempt);
- local activities: all of one workflow task's local activities count as one (their
  markers grouped by the workflow task that recorded them);
- timer started: `TimerStarted`, the SDK's implicit timers (a condition with a timeout)
  included;
- search-attribute upsert: each `UpsertWorkflowSearchAttributes`, however many attributes
  it sets, except one that only sets `TemporalChangeVersion` (exempt: versioning);
  attributes given at start are free;
- signal: each `WorkflowExecutionSignaled` (the receiver's event; a workflow's
  `SignalExternalWorkflowExecutionInitiated` is the same signal's sending side);
- update: each `WorkflowExecutionUpdateAccepted`;
- Nexus operation: each `NexusOperationScheduled`.

Not in a history, so not counted here: queries (one action each), heartbeats that reach
the server (the SDK throttles them to one per 80% of the heartbeat timeout; an activity
of ours that ends within a second sends none), rejected updates, schedules' own actions,
export. The benchmark sends none of those.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

CHANGE_VERSION = "TemporalChangeVersion"
LOCAL_ACTIVITY_MARKER = "core_local_activity"

_ONE_EACH = {
    EventType.EVENT_TYPE_TIMER_STARTED: "timer",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: "signal",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: "update",
    EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED: "workflow started",
    EventType.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED: "nexus operation",
}


def billable_actions(events: Iterable[HistoryEvent]) -> Counter[str]:
    """The actions one run's history bills, by kind."""
    actions: Counter[str] = Counter()
    local_activity_tasks: set[int] = set()
    for event in events:
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            started = event.workflow_execution_started_event_attributes
            if not started.HasField("parent_workflow_execution"):
                actions["workflow started"] += 1
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            actions["activity"] += max(1, event.activity_task_started_event_attributes.attempt)
        elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:
            marker = event.marker_recorded_event_attributes
            if marker.marker_name == LOCAL_ACTIVITY_MARKER:
                local_activity_tasks.add(marker.workflow_task_completed_event_id)
        elif kind == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
            if set(fields.indexed_fields) - {CHANGE_VERSION}:
                actions["search-attribute upsert"] += 1
        elif kind in _ONE_EACH:
            actions[_ONE_EACH[kind]] += 1
    if local_activity_tasks:
        actions["local activities"] = len(local_activity_tasks)
    return actions
