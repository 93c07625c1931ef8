"""agentctl doctor on replicas: SQLite stores are one machine's, so workers on several
machines polling the queue with them fail the stores' check with the setting to share;
one PostgreSQL store passes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from durable_agents.control.doctor import activity_pollers, diagnose, replicas_finding
from durable_agents.runtime.settings import Settings
from tests.conftest import eventually, postgres_or_skip

WHERE = "sqlite:/srv/agents/.data/agent.sqlite3"


def test_sqlite_stores_with_workers_on_several_machines_fail():
    finding = replicas_finding(WHERE, ["11@host-a", "12@host-b"])
    assert not finding.ok and finding.part == "stores"
    assert WHERE in finding.says and "2 workers on 2 machines (host-a, host-b)" in finding.says
    assert "AGENT_DATABASE_URL" in finding.fix and "StoreMissingRecords" in finding.fix


def test_sqlite_stores_on_one_machine_pass_with_what_replicas_need():
    alone = replicas_finding(WHERE, ["11@host-a"])
    assert alone.ok and "AGENT_DATABASE_URL" in alone.says
    assert replicas_finding(WHERE, []).ok  # no worker yet: the worker part says so
    two = replicas_finding(WHERE, ["11@host-a", "12@host-a"])
    assert two.ok and "AGENT_DATA_DIR" in two.says and "AGENT_DATABASE_URL" in two.fix


@activity.defn(name="noop")
async def noop() -> None:
    return None


@contextlib.asynccontextmanager
async def replicas(client: Client, settings: Settings, *hosts: str) -> AsyncIterator[None]:
    """Workers polling the queue's activities, one per host (as its identity says), each
    on a connection of its own, as replicas are."""
    target = client.service_client.config.target_host
    async with contextlib.AsyncExitStack() as stack:
        for number, host in enumerate(hosts, start=1):
            own = await Client.connect(target, namespace=client.namespace)
            await stack.enter_async_context(
                Worker(
                    own,
                    task_queue=settings.task_queue,
                    activities=[noop],
                    identity=f"{number}@{host}",
                )
            )
        yield


async def stores_finding(settings: Settings):
    [finding] = await diagnose(settings, {"stores"})
    return finding


async def test_doctor_names_replicas_on_several_machines_with_sqlite(dev_env, settings):
    async with replicas(dev_env.client, settings, "machine-a", "machine-b"):

        async def both_poll() -> list[str] | None:
            seen = await activity_pollers(settings)
            return seen if {"1@machine-a", "2@machine-b"} <= set(seen) else None

        await eventually(both_poll, within=60, interval=0.5)
        finding = await stores_finding(settings)
    assert not finding.ok, finding
    assert "machine-a, machine-b" in finding.says and settings.task_queue not in finding.fix
    assert "AGENT_DATABASE_URL" in finding.fix


async def test_one_postgres_store_passes_whatever_polls(dev_env, settings):
    shared = settings.model_copy(update={"database_url": postgres_or_skip()})
    async with replicas(dev_env.client, shared, "machine-a", "machine-b"):
        finding = await stores_finding(shared)
    assert finding.ok and "every replica can share" in finding.says
