"""DurableAgentsPlugin on a team's own client and worker: their workflow and activity and
our agents on one worker and one task queue of theirs, a client that speaks our payloads,
and a clear refusal where the wiring cannot work."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from functools import partial

import pytest
from pydantic import SecretStr
from temporalio import activity, workflow
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    PayloadCodec,
)
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from durable_agents import DurableAgentsPlugin, PluginError, Settings
from durable_agents.client import AgentClient
from durable_agents.runtime.encryption import new_key
from durable_agents.runtime.refused_payloads import SealedPayloadConverter
from durable_agents.testing import ScriptedModel, say
from durable_agents.worker.activities import production_activities
from durable_agents.worker.sandbox import NOT_WORKFLOW_CODE
from tests.calling.billing import GOOD, Billing, Dispute, TriageDecision, triage

SENT: list[str] = []


@activity.defn
async def send_invoice(customer: str) -> str:
    SENT.append(customer)
    return f"invoice sent to {customer}"


@workflow.defn
class Invoicing:
    """The team's own workflow, with no agent in it."""

    @workflow.run
    async def run(self, customer: str) -> str:
        return await workflow.execute_activity(
            send_invoice, customer, start_to_close_timeout=timedelta(seconds=10)
        )


def plugin_for(tmp_path, model: ScriptedModel, *, sealed: bool = False) -> DurableAgentsPlugin:
    keys = SecretStr(f"k1={new_key()}") if sealed else None
    settings = Settings(
        data_dir=tmp_path, task_queue="billing", metrics_port=0, encryption_keys=keys,
        namespace_is_ours_alone=True,
    )  # fmt: skip
    return DurableAgentsPlugin(
        [triage],
        settings=settings,
        activities=partial(production_activities, model_clients=lambda s, m: model),
    )


async def team_client(own_clock, plugin: DurableAgentsPlugin | None) -> Client:
    config = own_clock.client.config()
    return await Client.connect(
        own_clock.client.service_client.config.target_host,
        namespace=own_clock.client.namespace,
        plugins=[plugin] if plugin is not None else [],
        runtime=config.get("runtime"),
    )


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
async def test_the_teams_worker_runs_its_workflow_and_our_agents_side_by_side(
    own_clock, tmp_path, sealed
):
    model = ScriptedModel([say(GOOD)])
    plugin = plugin_for(tmp_path, model, sealed=sealed)
    tag = "sealed" if sealed else "plain"
    client = await team_client(own_clock, plugin)
    worker = Worker(
        client, task_queue="billing", workflows=[Invoicing, Billing], activities=[send_invoice]
    )
    async with worker:
        sent = await client.execute_workflow(
            Invoicing.run, "acme", id=f"invoice-acme-{tag}", task_queue="billing"
        )
        decided = await client.execute_workflow(
            Billing.run,
            Dispute(text="Customer 42", child_id=f"billing-9-{tag}.triage"),
            id=f"billing-9-{tag}",
            task_queue="billing",
        )
        # agentctl's client sees the agent's run like any other.
        agents = AgentClient(client, plugin.settings, plugin.registry)
        run = agents.run(f"billing-9-{tag}.triage")
        summary = await run.summary()
        typed = await run.output(TriageDecision)
        direct = await agents.start("triage", "Customer 43")
        direct_answer = await direct.output(TriageDecision)
        # A what-if through the same client: its own worker, never the client's plugin
        # (whose activities act) on the what-if's queue.
        report = await agents.what_if([f"billing-9-{tag}.triage"])
    assert sent == "invoice sent to acme" and SENT[-1] == "acme"
    # With keys set, the team's own workflow's payloads are sealed too (one converter).
    history = await client.get_workflow_handle(f"invoice-acme-{tag}").fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    [given] = started.input.payloads
    raw = await own_clock.client.get_workflow_handle(f"invoice-acme-{tag}").fetch_history()
    [stored] = raw.events[0].workflow_execution_started_event_attributes.input.payloads
    assert (stored.metadata["encoding"] == b"binary/encrypted") is sealed
    assert given.data != b""
    assert decided == "refund (high)"
    assert summary.agent == "triage" and typed.priority == "high"
    assert direct_answer.refund is True
    [played] = report.runs
    assert played.differences == [] and played.now.tokens == 0


async def test_a_worker_whose_client_lacks_the_plugin_is_refused_in_one_line(own_clock, tmp_path):
    plain = await team_client(own_clock, None)  # the SDK's default converter
    with pytest.raises(PluginError, match=r"pass DurableAgentsPlugin to Client.connect"):
        Worker(plain, task_queue="billing", plugins=[plugin_for(tmp_path, ScriptedModel([]))])


async def test_the_teams_own_sandbox_settings_are_kept_and_ours_added(own_clock, tmp_path):
    plugin = plugin_for(tmp_path, ScriptedModel([]))
    client = await team_client(own_clock, plugin)
    theirs = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("their_module")
    )
    worker = Worker(client, task_queue="billing", workflows=[Invoicing], workflow_runner=theirs)
    runner = worker.config(active_config=True)["workflow_runner"]
    assert isinstance(runner, SandboxedWorkflowRunner)
    passed = runner.restrictions.passthrough_modules
    assert "their_module" in passed and set(NOT_WORKFLOW_CODE) <= passed
    names = {getattr(w, "__name__", "") for w in worker.config(active_config=True)["workflows"]}
    assert {"Invoicing", "AgentWorkflow", "PruneWorkflow"} <= names


class TeamCodec(PayloadCodec):
    """A team's own codec (compression, their own keys): it stays theirs."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)


def test_a_teams_codec_is_kept_and_what_cannot_work_together_is_refused(tmp_path):
    plugin = plugin_for(tmp_path, ScriptedModel([]))
    theirs = DataConverter(payload_codec=TeamCodec())
    made = plugin.configure_client({"data_converter": theirs})["data_converter"]  # type: ignore[typeddict-item]
    assert isinstance(made.payload_codec, TeamCodec)
    # Ours over pydantic's: it fails a run whose start input it cannot read in one line.
    assert made.payload_converter_class is SealedPayloadConverter
    plain = plugin.configure_client({"data_converter": DataConverter.default})  # type: ignore[typeddict-item]
    assert plain["data_converter"].payload_converter_class is SealedPayloadConverter
    sealed = DurableAgentsPlugin(
        [],
        settings=plugin.settings.model_copy(
            update={"encryption_keys": SecretStr(f"k1={new_key()}")}
        ),
    )
    with pytest.raises(PluginError, match="a payload codec of its own and AGENT_ENCRYPTION_KEYS"):
        sealed.configure_client({"data_converter": theirs})  # type: ignore[typeddict-item]
    odd = DataConverter(payload_converter_class=OddConverter)
    with pytest.raises(PluginError, match="a payload converter of its own"):
        plugin.configure_client({"data_converter": odd})  # type: ignore[typeddict-item]


class OddConverter(CompositePayloadConverter):
    def __init__(self) -> None:
        super().__init__(*DefaultPayloadConverter.default_encoding_payload_converters)
