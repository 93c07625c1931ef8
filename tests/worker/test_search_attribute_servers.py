"""Where a worker with our plugin registers our search attributes: on Temporal's
time-skipping test server, which cannot list them, and nowhere else. Any other server
that will not list them to the worker (an authorizer's PERMISSION_DENIED, a gateway's
UNIMPLEMENTED: tests/worker/unlisting_server.py) is refused before the worker polls, in
one line naming `agentctl setup`, not registered (nor trusted). (A server that lists
them: tests/worker/test_worker_start_checks.py.)"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_agents import DurableAgentsPlugin, Settings
from durable_agents.infra.binaries import temporal_test_server
from durable_agents.infra.temporal_setup import SearchAttributesMissing
from durable_agents.workflows import search_attributes as sa
from tests.calling.billing import triage
from tests.conftest import _startup_timeout, eventually
from tests.worker.unlisting_server import UnlistingServer

QUEUE = "orders"


def ours(settings_dir: Path) -> DurableAgentsPlugin:
    settings = Settings(
        data_dir=settings_dir, task_queue=QUEUE, metrics_port=0, worker_versioning=False,
        namespace_is_ours_alone=True,
    )  # fmt: skip
    return DurableAgentsPlugin([triage], settings=settings)


async def started_with_ours(client: Client) -> bool:
    """A start that sets each of our attributes: refused where the namespace lacks one."""
    pairs = [SearchAttributePair(key, 1 if key._metadata_type == "Int" else "x") for key in sa.ALL]
    try:
        await client.start_workflow(
            "NobodyPolls",
            id=f"probe-{uuid.uuid4().hex[:8]}",
            task_queue="nobody-polls",
            search_attributes=TypedSearchAttributes(pairs),
        )
    except RPCError as err:
        if "is not defined" not in err.message:
            raise
        return False
    return True


async def test_the_test_server_gets_them_from_the_worker(tmp_path):
    env = await WorkflowEnvironment.start_time_skipping(  # none registered, unlike conftest's
        test_server_existing_path=str(temporal_test_server()),
        **_startup_timeout(WorkflowEnvironment.start_time_skipping, "test_server_startup_timeout"),
    )
    try:
        target = env.client.service_client.config.target_host
        client = await Client.connect(target, plugins=[ours(tmp_path)])
        assert not await started_with_ours(client)
        async with Worker(client, task_queue=QUEUE):  # registers before it polls
            await eventually(lambda: started_with_ours(client), within=30)
    finally:
        await env.shutdown()


@pytest.mark.parametrize(
    "status", [RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED], ids=lambda s: s.name
)
async def test_any_other_server_that_will_not_list_them_is_refused(status, tmp_path):
    server = UnlistingServer(status.value)
    async with server.serving() as target:
        client = await Client.connect(target, plugins=[ours(tmp_path)])
        worker = Worker(client, task_queue=QUEUE)
        with pytest.raises(SearchAttributesMissing) as refused:
            await asyncio.wait_for(worker.run(), timeout=30)
    said = str(refused.value)
    assert "\n" not in said and "agentctl setup" in said
    assert f"namespace 'default' ({status.name})" in said
