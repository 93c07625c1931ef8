"""Prune on demand: the same workflow the daily Schedule starts, run now and awaited."""

from __future__ import annotations

import re
import uuid

from temporalio.client import Client

from durable_agents.activities.pruning import below_retention
from durable_agents.control.runs import RunError
from durable_agents.runtime.settings import Settings
from durable_agents.workflows.activity_io import PruneReport, PruneRequest
from durable_agents.workflows.prune import PruneWorkflow

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """'30d', '12h', '90m', '0s' → seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhdw])", text.strip())
    if match is None:
        raise RunError(f"bad age {text!r}: use a number and one of s, m, h, d, w (e.g. 30d)")
    return float(match.group(1)) * UNITS[match.group(2)]


async def prune(client: Client, settings: Settings, older_than: str, dry_run: bool) -> PruneReport:
    request = PruneRequest(older_than_seconds=parse_age(older_than), dry_run=dry_run)
    refused = below_retention(request.older_than_seconds, settings.retention_days)
    if refused is not None:  # the worker refuses it too, whoever asks
        raise RunError(f"{refused}: ask for {settings.retention_days:g}d or more")
    report: PruneReport = await client.execute_workflow(
        PruneWorkflow.run,
        request,
        id=f"prune-{uuid.uuid4().hex[:10]}",
        task_queue=settings.task_queue,
    )
    return report
