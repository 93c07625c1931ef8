"""`agentctl setup` is a guest in a team's namespace: it registers our search attributes
and the prune Schedule, never rewrites the namespace's retention, and says which namespace
at which address it acted on (not the defaults it did not use)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError
from typer.testing import CliRunner

from durable_agents.infra.stack import settings_env
from durable_agents.starters.cli import app
from durable_agents.workflows import search_attributes as sa
from tests.conftest import eventually, settings_for


async def retention(client: Client, namespace: str) -> timedelta:
    described = await client.workflow_service.describe_namespace(
        DescribeNamespaceRequest(namespace=namespace)
    )
    return described.config.workflow_execution_retention_ttl.ToTimedelta()


async def registered(client: Client, namespace: str) -> set[str]:
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    return set(listed.custom_attributes)


def team_env(settings, namespace: str, address: str) -> dict[str, str]:
    """As a team sets it for `temporal`: TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE, none of
    our own address settings."""
    env = settings_env(settings) | {"TEMPORAL_ADDRESS": address, "TEMPORAL_NAMESPACE": namespace}
    for ours in ("AGENT_TEMPORAL_HOST", "AGENT_TEMPORAL_PORT", "AGENT_NAMESPACE"):
        env.pop(ours)
    return env


async def served(client: Client, namespace: str) -> bool:
    try:
        await registered(client, namespace)
    except RPCError:
        return False
    return True


async def setup_in(env: dict[str, str]) -> str:
    done = await asyncio.to_thread(CliRunner().invoke, app, ["setup"], env=env)
    assert done.exit_code == 0, done.output
    return " ".join(done.output.split())


async def test_setup_leaves_a_teams_retention_and_names_where_it_acted(
    dev_env, model_server, tmp_path
):
    client = dev_env.client
    theirs = f"team-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=theirs, workflow_execution_retention_period=Duration(seconds=720 * 3600)
        )
    )
    settings = settings_for(client, tmp_path / "data", model_server.port)
    address = client.service_client.config.target_host
    env = team_env(settings, theirs, address) | {"AGENT_RETENTION_DAYS": "7"}

    # One of ours is there already (an earlier, older setup): the others are added.
    await eventually(lambda: served(client, theirs))
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=theirs,
            search_attributes={"AgentStatus": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD},
        )
    )

    said = await setup_in(env)
    assert await retention(client, theirs) == timedelta(hours=720)
    assert f"namespace {theirs} at {address}" in said
    assert "retention left at 720h" in said
    assert {key.name for key in sa.ALL} <= await registered(client, theirs)
    # Again: nothing changes, and it says the same.
    assert await setup_in(env) == said
    assert await retention(client, theirs) == timedelta(hours=720)


async def test_setup_creates_a_missing_namespace_with_our_retention(
    dev_env, model_server, tmp_path
):
    client = dev_env.client
    new = f"fresh-{uuid.uuid4().hex[:8]}"
    settings = settings_for(client, tmp_path / "data", model_server.port)
    address = client.service_client.config.target_host
    env = team_env(settings, new, address) | {"AGENT_RETENTION_DAYS": "3"}
    said = await setup_in(env)
    assert await retention(client, new) == timedelta(days=3)
    assert "retention set to 72h (a namespace it created)" in said


async def test_a_name_taken_with_another_type_refuses_setup_before_it_registers_any(
    dev_env, model_server, tmp_path
):
    """One of our names taken with another type: setup checks every one of ours against
    all the namespace has first, so its refusal leaves none of ours registered (and the
    retention as it was), and says in one line what to remove."""
    client = dev_env.client
    theirs = f"taken-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=theirs, workflow_execution_retention_period=Duration(seconds=720 * 3600)
        )
    )
    await eventually(lambda: served(client, theirs))
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=theirs,
            search_attributes={sa.STEP.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD},
        )
    )
    settings = settings_for(client, tmp_path / "data", model_server.port)
    env = team_env(settings, theirs, client.service_client.config.target_host)

    done = await asyncio.to_thread(CliRunner().invoke, app, ["setup"], env=env)
    assert done.exit_code == 1
    assert done.output.strip().splitlines() == [
        f"error: namespace {theirs!r} has the search attributes {sa.STEP.name} (Keyword, not "
        f"Int): remove them (`temporal operator search-attribute remove --name "
        f"{sa.STEP.name}`), then run `agentctl setup`"
    ]
    others = {key.name for key in sa.ALL} - {sa.STEP.name}
    assert others.isdisjoint(await registered(client, theirs))
    assert await retention(client, theirs) == timedelta(hours=720)
