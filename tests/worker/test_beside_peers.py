"""Our plugin beside Temporal's official AI integrations: pydantic-ai's `PydanticAIPlugin`
and the OpenAI Agents SDK's `OpenAIAgentsPlugin`, installed for real, on one client and
one worker in either order, each framework's agent answering on the same task queue; and
with the team's own TracingInterceptor, every span recorded once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import pytest
from agents.models.openai_provider import OpenAIProvider
from openai import AsyncOpenAI
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr
from pydantic_ai.durable_exec.temporal import PydanticAIPayloadConverter, PydanticAIPlugin
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, Interceptor
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError
from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
from temporalio.openai_agents._temporal_openai_agents import OpenAIPayloadConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker

from durable_agents import DurableAgentsPlugin, PluginError, Settings
from durable_agents.client import AgentClient
from durable_agents.runtime import telemetry
from durable_agents.runtime.encryption import ENCODING, KEY_ID, new_key
from durable_agents.runtime.refused_payloads import REFUSED_TYPE, RefusesMarkers
from durable_agents.testing import ScriptedModel, call, say
from durable_agents.worker.activities import production_activities
from tests.worker import peer_agents, pydantic_peer_agent
from tests.worker.peer_agents import ANSWER, OpenAIAgentsPeerAgent, PydanticAIPeerAgent
from tests.worker.tool_loop import record_progress

TASK = "Record every work item."
PEERS = {
    "pydantic-ai": (PydanticAIPlugin, PydanticAIPayloadConverter, PydanticAIPeerAgent),
    "openai-agents": (OpenAIAgentsPlugin, OpenAIPayloadConverter, OpenAIAgentsPeerAgent),
}
CASES = [
    *[(peer, order, False) for peer in PEERS for order in ("ours-first", "theirs-first")],
    ("pydantic-ai", "ours-first", True),
    ("pydantic-ai", "theirs-first", True),
    ("openai-agents", "theirs-first", True),
]


def our_plugin(tmp_path, queue: str, *, sealed: bool = False) -> DurableAgentsPlugin:
    keys = SecretStr(f"k1={new_key()}") if sealed else None
    settings = Settings(
        data_dir=tmp_path, task_queue=queue, metrics_port=0, encryption_keys=keys,
        namespace_is_ours_alone=True,
    )  # fmt: skip
    model = ScriptedModel(
        [
            call("record_progress", step=1, note="n1"),
            call("record_progress", step=2, note="n2"),
            say(ANSWER),
        ]
    )
    return DurableAgentsPlugin(
        [peer_agents.ours],
        settings=settings,
        activities=partial(production_activities, model_clients=lambda s, m: model),
    )


def peer_plugin(peer: str, model_url: str) -> Any:  # the peers' packages are typed as Any
    if peer == "pydantic-ai":
        pydantic_peer_agent.point_at(model_url)
        return PydanticAIPlugin()
    client = AsyncOpenAI(base_url=model_url, api_key="offline")
    return OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=peer_agents.TIMEOUT),
        model_provider=OpenAIProvider(openai_client=client, use_responses=False),
    )


async def connect(env, plugins, interceptors: Sequence[Interceptor] = (), **kw) -> Client:
    return await Client.connect(
        env.client.service_client.config.target_host,
        namespace=env.client.namespace,
        plugins=plugins,
        interceptors=interceptors,
        runtime=env.client.config().get("runtime"),
        **kw,
    )


@pytest.mark.parametrize(
    ("peer", "order", "sealed"), CASES, ids=[f"{p}-{o}{'-sealed' * s}" for p, o, s in CASES]
)
async def test_both_frameworks_agents_answer_on_one_worker(
    own_clock, model_server, tmp_path, peer, order, sealed
):
    queue = f"beside-{peer}-{order}-{'sealed' if sealed else 'plain'}"
    ours = our_plugin(tmp_path, queue, sealed=sealed)
    theirs = peer_plugin(peer, model_server.base_url)
    client = await connect(own_clock, [ours, theirs] if order == "ours-first" else [theirs, ours])
    _, their_converter, their_workflow = PEERS[peer]
    # Their payload converter is the client's (ours mixed in where sealing needs it).
    converter = client.data_converter.payload_converter_class
    assert issubclass(converter, their_converter)
    # With keys ours must be mixed in; without, where their plugin takes it (the worker
    # lays it over theirs where the client's has none: worker/plugin.py).
    assert issubclass(converter, RefusesMarkers) or not sealed

    worker = Worker(
        client, task_queue=queue, workflows=[their_workflow], activities=[record_progress]
    )
    async with worker:
        answer = await client.execute_workflow(
            their_workflow.run, TASK, id=f"{queue}-peer", task_queue=queue
        )
        run = await AgentClient(client, ours.settings, ours.registry).start("recorder", TASK)
        result = await run.result()
    assert answer == ANSWER
    assert result.status == "completed" and result.final_answer == ANSWER

    raw = await own_clock.client.get_workflow_handle(f"{queue}-peer").fetch_history()
    [stored] = raw.events[0].workflow_execution_started_event_attributes.input.payloads
    assert (stored.metadata["encoding"] == ENCODING) is sealed  # their runs sealed too
    if sealed:
        # A payload the worker cannot open is refused for that input alone (invariant 8),
        # through their converter with our refusals mixed in.
        forged = Payload(metadata={"encoding": ENCODING, KEY_ID: b"nobody"}, data=b"x" * 40)
        with pytest.raises(ApplicationError) as refused:
            await client.data_converter.decode([forged], [str])
        assert refused.value.type == REFUSED_TYPE


async def test_sealed_before_the_openai_agents_plugin_is_refused_with_the_order_that_works(
    own_clock, model_server, tmp_path
):
    """The OpenAI Agents SDK's plugin takes no payload converter but the SDK's default, so
    ours cannot mix its refusals into it from before: said in one line, at connect."""
    ours = our_plugin(tmp_path, "sealed-first", sealed=True)
    theirs = peer_plugin("openai-agents", model_server.base_url)
    with pytest.raises(PluginError, match=r"OpenAIAgentsPlugin takes .* list DurableAgentsPlugin"):
        await connect(own_clock, [ours, theirs])


def test_a_converter_that_cannot_carry_pydantic_models_is_still_refused(tmp_path):
    from tests.worker.test_plugin import OddConverter

    plugin = our_plugin(tmp_path, "odd")
    odd = DataConverter(payload_converter_class=OddConverter)
    with pytest.raises(PluginError, match=r"of its own \(OddConverter\) that does not carry"):
        plugin.configure_client({"data_converter": odd, "plugins": [plugin]})  # type: ignore[typeddict-item]


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider (set once per process: another module's if there is
    one), exporting to memory as well."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert telemetry.tracing_installed()
    yield exporter
    exporter.shutdown()


def run_spans(finished: tuple[ReadableSpan, ...], run_id: str) -> list[ReadableSpan]:
    """The spans of the trace that started the run."""
    starts = [
        s
        for s in finished
        if s.name == "StartWorkflow:AgentWorkflow"
        and s.attributes is not None
        and s.attributes.get("temporalWorkflowID") == run_id
    ]
    assert len(starts) == 1, f"the start of {run_id} recorded {len(starts)} times"
    [start] = starts
    assert start.context is not None
    return [s for s in finished if s.context and s.context.trace_id == start.context.trace_id]


def shape(spans: list[ReadableSpan]) -> Counter[tuple[str, str | None]]:
    """Each span as (its name, its parent's name)."""
    names = {s.context.span_id: s.name for s in spans if s.context}
    return Counter((s.name, names.get(s.parent.span_id) if s.parent else None) for s in spans)


async def test_the_teams_tracing_interceptor_and_ours_record_each_span_once(
    spans, own_clock, tmp_path
):
    """Tracing installed before the plugin is built (the team's tracer provider): with the
    team's TracingInterceptor on the client, on the client our worker gets, or added by a
    plugin listed after ours (on the client or the worker), each span comes once, as with
    ours alone."""
    shapes = {}
    ways = ["ours alone", "theirs on the client", "ours on the worker only"]
    ways += ["theirs in a later client plugin", "theirs in a later worker plugin"]
    for way in ways:
        queue = f"traced-{way.replace(' ', '-')}"
        plugin = our_plugin(tmp_path / queue, queue)
        team = [TracingInterceptor()]
        later = SimplePlugin("team.Tracing", interceptors=team)
        worker_plugins: list[Any] = []
        starter = None
        if way == "ours alone":
            client = await connect(own_clock, [plugin])
        elif way == "theirs on the client":
            client = await connect(own_clock, [plugin], team)
        elif way == "ours on the worker only":
            client = await connect(own_clock, [], team, data_converter=pydantic_data_converter)
            worker_plugins = [plugin]
        elif way == "theirs in a later client plugin":
            client = await connect(own_clock, [plugin, later])
        else:  # started by a client that traces its calls, run by one that does not
            client = await connect(own_clock, [], data_converter=pydantic_data_converter)
            worker_plugins = [plugin, later]
            traced = [TracingInterceptor()]
            starter = await connect(own_clock, [], traced, data_converter=pydantic_data_converter)
        spans.clear()
        async with Worker(client, task_queue=queue, plugins=worker_plugins):
            agents = AgentClient(starter or client, plugin.settings, plugin.registry)
            run = await agents.start("recorder", TASK)
            assert (await run.result()).status == "completed"
        shapes[way] = shape(run_spans(spans.get_finished_spans(), run.run_id))
        # A second interceptor would nest every span in a twin of itself.
        assert not [(name, parent) for name, parent in shapes[way] if name == parent]
    assert shapes["ours alone"][("RunActivity:call_model", "StartActivity:call_model")] == 3
    for way in ways[1:]:
        assert shapes[way] == shapes["ours alone"], way


def test_temporals_opentelemetry_plugin_counts_as_tracing(spans, tmp_path):
    """temporalio's OpenTelemetryPlugin traces with an OpenTelemetryInterceptor, no
    TracingInterceptor: beside it, in either order, ours adds none."""
    otel = pytest.importorskip("temporalio.contrib.opentelemetry")
    if not hasattr(otel, "OpenTelemetryPlugin"):
        pytest.skip("temporalio before 1.35 has no OpenTelemetryPlugin")
    for order in ("ours-first", "theirs-first"):
        plugin, theirs = our_plugin(tmp_path, "otel"), otel.OpenTelemetryPlugin()
        plugins = [plugin, theirs] if order == "ours-first" else [theirs, plugin]
        config: dict[str, Any] = {"plugins": plugins, "interceptors": []}
        for each in plugins:
            config = each.configure_client(config)
        made = config["interceptors"]
        assert [type(i).__name__ for i in made] == ["OpenTelemetryInterceptor"], order
