"""Traces from the starter through the workflow into every activity, with a GenAI span per
model call and a span per tool call; replay emits nothing twice."""

from __future__ import annotations

import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.worker import Replayer

from durable_agents.control import runs
from durable_agents.infra.stack import worker_polling
from durable_agents.runtime import telemetry
from durable_agents.runtime.client import connect, data_converter
from durable_agents.worker.main import build_worker
from durable_agents.workflows.agent import AgentWorkflow
from durable_agents.workflows.contracts import RunRequest
from tests.conftest import approve_when_asked, eventually, run_id, spawn_worker


@pytest.fixture(scope="module")
def spans():
    """The process's tracer provider, exporting to memory (it can be set only once: another
    module's, tests/worker/test_beside_peers.py's, where it came first)."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert telemetry.tracing_installed()
    yield exporter
    exporter.shutdown()  # later tests' spans go nowhere


def by_name(finished, prefix):
    return [span for span in finished if span.name.startswith(prefix)]


def ancestors(span, index):
    chain = []
    while span.parent is not None and span.parent.span_id in index:
        span = index[span.parent.span_id]
        chain.append(span.name)
    return chain


async def test_one_trace_from_starter_to_each_model_and_tool_call(spans, dev_env, settings):
    spans.clear()
    client = await connect(settings)  # tracing is installed: the interceptor is on
    rid = run_id("traced")
    async with build_worker(client, settings):
        await runs.start_run(client, settings, RunRequest(goal="pay", label="pay-invoice"), rid)
        await approve_when_asked(client, rid)
        assert (await runs.wait_result(client, rid)).status == "completed"
        state = await runs.get_state(client, rid)
    finished = spans.get_finished_spans()
    index = {span.context.span_id: span for span in finished}

    [start] = by_name(finished, "StartWorkflow:AgentWorkflow")
    run_trace = [span for span in finished if span.context.trace_id == start.context.trace_id]
    work = [s for s in finished if s.name.startswith(("RunActivity:", "chat ", "execute_tool "))]
    assert work and all(span in run_trace for span in work)
    assert by_name(run_trace, "RunWorkflow:AgentWorkflow")

    models = by_name(finished, "chat ")
    assert len(models) == state.usage.model_calls == 10  # plan, 4 steps x 2 turns, answer
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in models) == (
        state.usage.input_tokens
    )
    for span in models:
        chain = ancestors(span, index)
        assert chain[0] == "RunActivity:call_model"
        assert chain[-1] == "StartWorkflow:AgentWorkflow"
        attrs = span.attributes
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.system"] == "offline"
        assert attrs["gen_ai.request.model"] == settings.effective_model_name
        assert attrs["gen_ai.response.model"] == settings.effective_model_name
        assert attrs["gen_ai.usage.input_tokens"] > 0
        assert attrs["gen_ai.usage.output_tokens"] > 0
        assert attrs["gen_ai.response.finish_reasons"] in (("tool_calls",), ("stop",))

    tools = {
        span.attributes["gen_ai.tool.name"]: span for span in by_name(finished, "execute_tool")
    }
    pay = tools["pay_invoice"]
    assert ancestors(pay, index)[0] == "RunActivity:run_tool"
    assert ancestors(pay, index)[-1] == "StartWorkflow:AgentWorkflow"
    assert pay.attributes["agent.tool.risk"] == "needs_approval"
    [pay_request] = state.approvals
    assert pay.attributes["agent.tool.idempotency_key"] == (
        f"{state.store_key}/step-{pay_request.step}/{pay_request.request_id}"
    )
    assert pay.attributes["agent.tool.outcome"] == "ok"
    lookup = tools["lookup_invoice"]
    assert lookup.attributes["agent.tool.risk"] == "read_only"
    assert "agent.tool.idempotency_key" not in lookup.attributes

    # Replaying the whole history emits no span a second time.
    emitted = Counter(span.name for span in spans.get_finished_spans())
    history = await client.get_workflow_handle(rid).fetch_history()
    replayer = Replayer(
        workflows=[AgentWorkflow],
        interceptors=[TracingInterceptor(telemetry.tracer())],
        data_converter=data_converter(settings),
    )
    await replayer.replay_workflow(history)
    assert Counter(span.name for span in spans.get_finished_spans()) == emitted
    assert emitted["RunActivity:call_model"] == len(models)


class OtlpReceiver:
    """A stand-in collector: records what arrives at /v1/traces over real HTTP."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    received.append(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


async def test_spans_reach_an_otlp_endpoint_when_one_is_set(dev_env, settings, tmp_path):
    receiver = OtlpReceiver()
    worker = spawn_worker(
        settings, tmp_path / "worker.log", OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url
    )
    rid = run_id("otlp")
    try:
        await eventually(lambda: worker_polling(settings), within=30)
        request = RunRequest(goal="report", label="long?steps=2")
        await runs.start_run(dev_env.client, settings, request, rid)
        assert (await runs.wait_result(dev_env.client, rid)).status == "completed"
    finally:
        worker.terminate()  # the worker flushes its spans as it stops
        worker.wait(timeout=30)
        receiver.server.shutdown()
    exported = b"".join(receiver.bodies)
    assert b"chat scripted-offline-model" in exported
    assert b"RunActivity:call_model" in exported
    assert rid.encode() in exported  # the run id attribute


def test_which_exporters_the_otel_variables_choose(settings, monkeypatch):
    assert settings.trace_exporters == set()  # nothing set: no tracing
    assert telemetry.install_tracing(settings) is None
    otlp = settings.model_copy(update={"otel_exporter_otlp_endpoint": "http://collector:4318"})
    assert otlp.trace_exporters == {"otlp"}
    both = otlp.model_copy(update={"otel_traces_exporter": "console, otlp"})
    assert both.trace_exporters == {"console", "otlp"}
    assert otlp.model_copy(update={"otel_traces_exporter": "none"}).trace_exporters == set()
    wrong = settings.model_copy(update={"otel_traces_exporter": "zipkin"})
    with pytest.raises(ValueError, match="unknown exporter"):
        telemetry.install_tracing(wrong)
