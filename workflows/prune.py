"""The prune workflow: what the daily Schedule starts, and what `agentctl prune` runs."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import VersioningBehavior

with workflow.unsafe.imports_passed_through():
    from durable_agents.workflows.activity_io import PruneReport, PruneRequest

PRUNE_STORED_RUNS = "prune_stored_runs"


@workflow.defn(name="PruneWorkflow")
class PruneWorkflow:
    @workflow.run
    async def run(self, request: PruneRequest) -> PruneReport:
        report: PruneReport = await workflow.execute_activity(
            PRUNE_STORED_RUNS,
            request,
            result_type=PruneReport,
            start_to_close_timeout=timedelta(hours=1),
            heartbeat_timeout=timedelta(minutes=1),
            summary="prune: stored data of old closed runs",
        )
        return report


# Short housekeeping with no state worth pinning: on a versioned worker it moves to the
# current build. A separate class because Temporal refuses a versioning behaviour from an
# unversioned worker (AGENT_WORKER_VERSIONING=false).
@workflow.defn(name="PruneWorkflow", versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class AutoUpgradingPruneWorkflow(PruneWorkflow):
    @workflow.run
    async def run(self, request: PruneRequest) -> PruneReport:
        return await super().run(request)
