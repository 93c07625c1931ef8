"""Traces and metrics: OpenTelemetry spans for model and tool calls, Prometheus metrics.

Tracing follows the standard OTEL_* variables: OTLP when an endpoint is set, the console
when OTEL_TRACES_EXPORTER says so, nothing otherwise. Metrics go through the Temporal
SDK's runtime, so the SDK's own and ours share one Prometheus endpoint on the worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from temporalio.common import MetricMeter
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from durable_agents.runtime.settings import Settings

TRACER_NAME = "durable_agents"


def install_tracing(settings: Settings) -> TracerProvider | None:
    """Install the process's tracer provider from the OTEL_* settings; None when off."""
    exporters = settings.trace_exporters
    if not exporters:
        return None
    unknown = exporters - {"otlp", "console"}
    if unknown:
        raise ValueError(
            f"OTEL_TRACES_EXPORTER={settings.otel_traces_exporter!r}: unknown exporter(s) "
            f"{', '.join(sorted(unknown))}; use otlp, console or none"
        )
    processors: list[SpanProcessor] = []
    if "otlp" in exporters:
        # Imported only when used: it pulls in protobuf and an HTTP client.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processors.append(BatchSpanProcessor(OTLPSpanExporter()))
    if "console" in exporters:
        processors.append(BatchSpanProcessor(ConsoleSpanExporter()))
    provider = TracerProvider(
        resource=Resource.create({"service.name": settings.otel_service_name})
    )
    for processor in processors:
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def tracing_installed() -> bool:
    """Whether this process records spans (an SDK provider is installed)."""
    return isinstance(trace.get_tracer_provider(), TracerProvider)


def flush_tracing() -> None:
    """Export the spans still buffered before the process exits."""
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.shutdown()


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


@contextmanager
def span(name: str, attributes: dict[str, Any]) -> Iterator[trace.Span]:
    """A span with attributes; an exception marks it failed and goes on."""
    with tracer().start_as_current_span(name, attributes=attributes) as current:
        yield current


# -- metrics ------------------------------------------------------------------------------
def runtime_for(settings: Settings) -> Runtime | None:
    """A runtime serving Prometheus metrics on the configured port; None when the port is 0."""
    if settings.metrics_port == 0:
        return None
    address = f"{settings.metrics_host}:{settings.metrics_port}"
    try:
        return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=address)))
    except ValueError as err:
        raise MetricsUnavailable(
            f"cannot serve metrics on {address} ({err}); set AGENT_METRICS_PORT to a free "
            "port, or to 0 for no metrics endpoint"
        ) from err


class MetricsUnavailable(RuntimeError):
    pass


class RunGauges:
    """Runs by status and approvals waiting, as the visibility store counts them."""

    def __init__(self, meter: MetricMeter) -> None:
        self.runs = meter.create_gauge(
            "durable_agents_runs", "Open runs by agent status; closed runs by outcome"
        )
        self.approvals = meter.create_gauge(
            "durable_agents_approvals_waiting", "Runs waiting for a person's approval"
        )

    def set(self, by_status: dict[str, int], approvals_waiting: int) -> None:
        for status, count in by_status.items():
            self.runs.with_additional_attributes({"status": status}).set(count)
        self.approvals.set(approvals_waiting)
