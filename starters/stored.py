"""What the CLI reads from our own stores (ledger, transcript): only a store this machine
can reach. PostgreSQL is shared by every machine; a SQLite file is the worker's own, so a
verb that needs it says so instead of reading another disk's copy."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from activities.ledger import EffectLedger
from activities.stores import open_database
from activities.transcript import TranscriptStore
from starters.runs import RunError
from worker.encryption import keyring_from
from worker.settings import Settings
from workflows.state import IDENTITY_SEPARATOR


def _local_note(settings: Settings) -> str:
    return (
        f"our stores are SQLite, local to the worker ({settings.database_path}); run this on "
        "the worker's machine with its AGENT_DATA_DIR, or give both AGENT_DATABASE_URL "
        "(PostgreSQL)"
    )


def _check_reachable(settings: Settings) -> None:
    if settings.database_url is None and not settings.database_path.exists():
        raise RunError(f"no store here: {_local_note(settings)}")


def transcript_store(settings: Settings) -> TranscriptStore:
    _check_reachable(settings)
    return TranscriptStore(open_database(settings), keyring_from(settings))


def effect_ledger(settings: Settings) -> EffectLedger:
    _check_reachable(settings)
    return EffectLedger(open_database(settings), keyring_from(settings))


async def store_keys(client: Client, run_id: str) -> list[str]:
    """Where a run's rows may be, most likely first: under its chain's identity (runs of
    this version), then under its bare workflow id (runs started before identities)."""
    try:
        description = await client.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RunError(f"no run with id {run_id}") from None
        raise RunError(f"cannot read run {run_id}: {err.message}") from None
    first = description.raw_description.workflow_execution_info.first_run_id or description.run_id
    return [f"{run_id}{IDENTITY_SEPARATOR}{first}", run_id]


async def run_effects(client: Client, settings: Settings, run_id: str) -> list[dict[str, Any]]:
    """The effects our ledger recorded for a run: what the run really did."""
    keys = await store_keys(client, run_id)
    ledger = effect_ledger(settings)
    for key in keys:
        if found := ledger.effects(key):
            return found
    if settings.database_url is None:
        raise RunError(f"no effects of {run_id} in this machine's store; {_local_note(settings)}")
    return []
