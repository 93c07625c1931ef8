"""A worker with our plugin checks, before it polls, what would otherwise fail later and
quietly: a namespace without our search attributes is refused in one line naming the
command (every run, ours or the team's calling an agent, would sit stuck on its first
upsert), and a worker with no model says once what to set."""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.worker import Worker

from durable_agents import DurableAgentsPlugin, Settings
from durable_agents.infra.temporal_setup import (
    SearchAttributesMissing,
    register_search_attributes,
    set_up_namespace,
)
from tests.calling.billing import triage
from tests.conftest import eventually


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def new_namespace(client: Client) -> str:
    name = f"bare-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=name, workflow_execution_retention_period=Duration(seconds=86400)
        )
    )
    return name


async def served(client: Client) -> bool:
    try:
        await client.count_workflows()
    except Exception:
        return False
    return True


async def test_a_namespace_without_our_search_attributes_is_refused_at_start(
    dev_env, model_server, tmp_path
):
    target = dev_env.client.service_client.config.target_host
    bare = await new_namespace(dev_env.client)
    settings = Settings(
        data_dir=tmp_path, task_queue="orders", metrics_port=0, namespace=bare,
        offline_model_port=model_server.port, namespace_is_ours_alone=True,
    )  # fmt: skip
    client = await Client.connect(
        target, namespace=bare, plugins=[DurableAgentsPlugin([triage], settings=settings)]
    )
    await eventually(lambda: served(client))
    worker = Worker(client, task_queue="orders")
    with pytest.raises(SearchAttributesMissing) as refused:
        await asyncio.wait_for(worker.run(), timeout=60)
    said = str(refused.value)
    assert "\n" not in said and "agentctl setup" in said and bare in said
    assert "AgentStatus" in said

    # Registered (as `agentctl setup` does), the same worker wiring starts and polls.
    await register_search_attributes(client)
    async with Worker(client, task_queue="orders-again"):
        pass


async def test_an_attribute_of_another_type_is_refused_by_worker_and_setup(
    dev_env, model_server, tmp_path
):
    """A name a team (or an older setup) took with another type: setup cannot change it,
    so neither setup nor the worker says all is well; both say what to remove."""
    target = dev_env.client.service_client.config.target_host
    bare = await new_namespace(dev_env.client)
    client = await Client.connect(target, namespace=bare)
    await eventually(lambda: served(client))
    await client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=bare,
            search_attributes={"AgentStep": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD},
        )
    )
    await register_search_attributes(client)  # the others
    settings = Settings(
        data_dir=tmp_path, task_queue="orders", metrics_port=0, namespace=bare,
        offline_model_port=model_server.port, namespace_is_ours_alone=True,
    )  # fmt: skip
    with pytest.raises(SearchAttributesMissing) as refused:
        await set_up_namespace(client, settings, ours=False)
    said = str(refused.value)
    assert "AgentStep (Keyword, not Int)" in said and "search-attribute remove" in said
    assert "\n" not in said
    ours = await Client.connect(
        target, namespace=bare, plugins=[DurableAgentsPlugin([triage], settings=settings)]
    )
    with pytest.raises(SearchAttributesMissing, match="AgentStep"):
        await asyncio.wait_for(Worker(ours, task_queue="orders").run(), timeout=60)


async def test_a_worker_with_no_model_says_what_to_set(dev_env, tmp_path, caplog):
    settings = Settings(
        data_dir=tmp_path, task_queue=f"tq-{uuid.uuid4().hex[:8]}", metrics_port=0,
        namespace=dev_env.client.namespace, offline_model_port=closed_port(),
        namespace_is_ours_alone=True,
    )  # fmt: skip
    client = await Client.connect(
        dev_env.client.service_client.config.target_host,
        namespace=dev_env.client.namespace,
        plugins=[DurableAgentsPlugin([triage], settings=settings)],
    )
    with caplog.at_level(logging.WARNING, logger="durable_agents"):
        async with Worker(client, task_queue=settings.task_queue):
            await eventually(lambda: _said(caplog, "no model configured"))
    [line] = [r.getMessage() for r in caplog.records if "no model configured" in r.getMessage()]
    assert "OPENAI_BASE_URL" in line and "\n" not in line


async def _said(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in record.getMessage() for record in caplog.records)
