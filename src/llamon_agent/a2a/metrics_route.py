"""``GET /metrics``: the OpenTelemetry metrics in the Prometheus text format (off by default).

``create_app(..., metrics=True)`` (``serve(..., metrics=True)``, ``llamon serve --metrics``)
adds the route; it needs the ``otel`` extra (``pip install 'llamon-agent[otel]'``: the
OpenTelemetry SDK and prometheus-client). The route reads one process-wide metric reader
(``metrics_reader()``): when no OpenTelemetry ``MeterProvider`` is configured yet, one is set
with that reader; when yours is (an SDK ``MeterProvider``, e.g. exporting OTLP), the reader
is added to it, so both see the same counts. The route asks for the same credentials as the
agent when the server has ``auth``.

Names follow the Prometheus conventions: ``llamon.tasks`` is ``llamon_tasks_total``, a
histogram in seconds gets ``_seconds`` (``llamon_failure_latency_seconds_bucket`` ...), and
attribute keys have ``_`` for ``.`` (``llamon_task_state``, ``gen_ai_agent_name``). Label
values are bounded: states, errorCodes, reasons, agent and tool names -- never an id::

    llamon_tasks_total{gen_ai_agent_name="echo",llamon_error_code="INVALID_INPUT",
                       llamon_task_state="failed"} 1.0
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Final

from opentelemetry import metrics
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from llamon_agent._extras import requires_extra

with requires_extra("otel", "the /metrics route"):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        Histogram,
        HistogramDataPoint,
        InMemoryMetricReader,
        NumberDataPoint,
        Sum,
    )
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import Collector

__all__ = ["METRICS_PATH", "install_metrics_reader", "metrics_reader", "metrics_routes"]

METRICS_PATH: Final = "/metrics"

_INVALID: Final = re.compile(r"[^a-zA-Z0-9_]")
_reader: InMemoryMetricReader | None = None


def metrics_reader() -> InMemoryMetricReader:
    """The one reader ``/metrics`` reads (made on first use, cumulative).

    Configuring your own ``MeterProvider``? Pass it among its readers
    (``MeterProvider(metric_readers=[metrics_reader(), ...])``), or let
    ``install_metrics_reader`` add it.
    """
    global _reader
    if _reader is None:
        _reader = InMemoryMetricReader()
    return _reader


def install_metrics_reader() -> InMemoryMetricReader:
    """Make sure the global ``MeterProvider`` feeds ``metrics_reader()``: set one with it
    when none is configured, add it to an SDK provider that lacks it. Returns the reader."""
    reader = metrics_reader()
    provider = metrics.get_meter_provider()
    if isinstance(provider, MeterProvider):
        if reader not in provider._all_metric_readers:
            provider.add_metric_reader(reader)
    else:
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return reader


def _name(text: str) -> str:
    return _INVALID.sub("_", text)


def _labels(attributes: Mapping[str, object] | None) -> dict[str, str]:
    return {_name(key): str(value) for key, value in sorted((attributes or {}).items())}


class _OpenTelemetryCollector(Collector):
    """prometheus-client's view of what the reader holds: counters and histograms."""

    def __init__(self, reader: InMemoryMetricReader) -> None:
        self.reader = reader

    def collect(self) -> Iterator[Metric]:
        data = self.reader.get_metrics_data()
        if data is None:
            return
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found = _converted(
                        metric.name, metric.unit, metric.description or "", metric.data
                    )
                    if found is not None:
                        yield found


def _converted(name: str, unit: str | None, description: str, data: object) -> Metric | None:
    base = _name(name) + ("_seconds" if unit == "s" else "")
    if isinstance(data, Sum):
        kind = "counter" if data.is_monotonic else "gauge"
        family = Metric(base, description, kind)
        for number in data.data_points:
            if isinstance(number, NumberDataPoint):
                sample = base + "_total" if kind == "counter" else base
                family.add_sample(sample, _labels(number.attributes), float(number.value))
        return family
    if isinstance(data, Histogram):
        family = Metric(base, description, "histogram")
        for point in data.data_points:
            if not isinstance(point, HistogramDataPoint):
                continue
            labels = _labels(point.attributes)
            running = 0
            bounds = [*(repr(float(b)) for b in point.explicit_bounds), "+Inf"]
            for bound, count in zip(bounds, point.bucket_counts, strict=False):
                running += count
                family.add_sample(base + "_bucket", {**labels, "le": bound}, float(running))
            family.add_sample(base + "_count", labels, float(point.count))
            family.add_sample(base + "_sum", labels, float(point.sum))
        return family
    return None


def metrics_routes() -> list[Route]:
    """``GET /metrics`` over ``install_metrics_reader()``'s reader."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_OpenTelemetryCollector(install_metrics_reader()))

    async def scrape(_: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return [Route(METRICS_PATH, scrape, methods=["GET"])]
