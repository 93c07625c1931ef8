"""A run's continue-as-new chain, as Temporal holds it: the one walk that control/
timeline.py (time travel, exports) and worker/fork_state.py (a fork's parent) share."""

from __future__ import annotations

from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode


async def chain_starts(client: Client, workflow_id: str) -> list[tuple[str, HistoryEvent]]:
    """Every run of the chain, oldest first, with its first event (a page of one): walked
    back from the current run, so a chain whose current run came from a reset holds, and
    only as far back as Temporal still keeps runs (its retention removes the oldest).
    Temporal's RPCError (no such workflow, say) is the caller's to word."""
    current: str | None = (await client.get_workflow_handle(workflow_id).describe()).run_id
    chain: list[tuple[str, HistoryEvent]] = []
    while current:
        handle = client.get_workflow_handle(workflow_id, run_id=current)
        try:
            first = await anext(aiter(handle.fetch_history_events(page_size=1)))
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND or not chain:
                raise
            break  # Temporal's retention removed the runs before: the chain it still keeps
        chain.insert(0, (current, first))
        started = first.workflow_execution_started_event_attributes
        current = started.continued_execution_run_id or None
    return chain
