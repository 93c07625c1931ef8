"""The activities a worker registers for the agent and prune workflows: one list for a
production worker, one for a what-if worker, both built here and nowhere else."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio.client import Client

from durable_agents.activities.child_spend import child_spend
from durable_agents.activities.claims import SignatureClaims
from durable_agents.activities.crash_points import CrashPoints
from durable_agents.activities.mcp import MCPActivities
from durable_agents.activities.memory import embedder
from durable_agents.activities.model import ClientFactory, ModelActivities, openai_clients
from durable_agents.activities.pruning import PruneActivities
from durable_agents.activities.runs import await_run, fork_origin, run_origin, scheduled_run
from durable_agents.activities.shadow import Recordings, ShadowModelActivities, ShadowToolActivities
from durable_agents.activities.stores import Stores
from durable_agents.activities.tools import ToolActivities
from durable_agents.activities.transcript import TranscriptActivities
from durable_agents.runtime.settings import Settings, SettingsInvalid
from durable_agents.worker.fork_state import ForkStates
from durable_agents.workflows import faults
from durable_agents.workflows.contracts import SubjectKey, TrustedKey
from durable_agents.workflows.registry import AgentRegistry
from durable_agents.workflows.signed_payments import trusted_keys_from


def _parts(
    settings: Settings,
    registry: AgentRegistry,
    model_clients: ClientFactory,
    crash_points: CrashPoints,
) -> tuple[Stores, ModelActivities, ToolActivities, MCPActivities]:
    stores = Stores.open(settings)
    model = ModelActivities(settings, stores, registry, model_clients)
    embed = embedder(settings.model_base_url, settings.model_api_key, settings.embedding_model)
    caps = (settings.memory_recall_limit, settings.memory_recall_bytes)
    tools = ToolActivities(
        stores, crash_points, registry, settings.data_dir, embed, caps,
        settings.revoked_keys, subject_keys(settings), payment_keys(settings),
    )  # fmt: skip
    return stores, model, tools, MCPActivities(settings, stores, registry)


def subject_keys(settings: Settings) -> dict[str, SubjectKey]:
    """AGENT_SUBJECT_KEYS as runs check them; a key that is no Ed25519 key stops the worker."""
    return {
        key_id: SubjectKey.model_validate(key.model_dump())
        for key_id, key in settings.subject_keys.items()
    }


def payment_keys(settings: Settings) -> dict[str, TrustedKey]:
    """AGENT_TRUSTED_KEYS_FILE's keys when AGENT_REQUIRE_SIGNED_PAYMENTS is on (else none);
    a file that cannot be used stops the worker in one line."""
    if not settings.require_signed_payments or settings.trusted_keys_file is None:
        return {}
    try:
        return trusted_keys_from(settings.trusted_keys_file.read_text())
    except OSError as err:
        raise SettingsInvalid(f"AGENT_TRUSTED_KEYS_FILE {err.filename}: {err.strerror}") from None
    except ValueError as err:
        raise SettingsInvalid(
            f"AGENT_TRUSTED_KEYS_FILE {settings.trusted_keys_file}: {err}"
        ) from None


def production_activities(
    client: Client,
    settings: Settings,
    registry: AgentRegistry,
    *,
    model_clients: ClientFactory = openai_clients,
) -> list[Callable[..., Any]]:
    """Every activity the agent and prune workflows call, acting for real."""
    crash_points = CrashPoints(settings.crash_at, settings.data_dir)
    faults.install(crash_points.workflow_hook())
    stores, model, tools, mcp = _parts(settings, registry, model_clients, crash_points)
    return [
        model.call_model,
        tools.run_tool,
        tools.evaluate_call,
        tools.resolve_agent,
        mcp.list_mcp_tools,
        mcp.call_mcp_tool,
        await_run,
        child_spend,
        fork_origin,
        run_origin,
        scheduled_run,
        SignatureClaims(stores.ledger).claim_signature,
        ForkStates(registry).parent_state_at,
        TranscriptActivities(stores.transcript, stores.pruned, stores.ledger).copy_transcript,
        PruneActivities(
            client,
            stores.db,
            stores.memory,
            settings.memory_retention_days,
            settings.retention_days,
        ).prune_stored_runs,
    ]


def shadow_activities(
    settings: Settings,
    registry: AgentRegistry,
    recordings: Recordings,
    *,
    model_clients: ClientFactory = openai_clients,
) -> list[Callable[..., Any]]:
    """A what-if worker's: its model answering from the recorded runs' memo where it can,
    its tools from the record (activities/shadow.py); none of them acts."""
    crash_points = CrashPoints(None, settings.data_dir)
    stores, model, tools, mcp = _parts(settings, registry, model_clients, crash_points)
    shadow_tools = ShadowToolActivities(tools, mcp, recordings)
    shadow_model = ShadowModelActivities(model, set(recordings.calls))
    return [
        shadow_model.call_model,
        shadow_tools.run_tool,
        shadow_tools.call_mcp_tool,
        shadow_tools.evaluate_call,
        shadow_tools.resolve_agent,
        mcp.list_mcp_tools,
        await_run,
        child_spend,
        fork_origin,
        run_origin,
        TranscriptActivities(stores.transcript, stores.pruned, stores.ledger).copy_transcript,
    ]
