"""One OpenTelemetry SDK for the test process: every finished span kept in memory.

OpenTelemetry's global tracer provider can be set once per process, so the first test
that asks for ``span_exporter()`` sets it (an SDK ``TracerProvider`` with a
``SimpleSpanProcessor`` into a bounded in-memory exporter) and every later one shares it;
each test clears the exporter first and reads only its own spans. The exporter keeps the
last ``KEPT`` spans only, since the rest of the suite runs with the SDK set too.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = [
    "KEPT",
    "KeptSpans",
    "StartedSpans",
    "span_exporter",
    "span_texts",
    "spans_named",
    "spans_of_a_provider_of_its_own",
]

KEPT = 5000


class KeptSpans(SpanExporter):
    """The last ``KEPT`` finished spans, in the order they ended."""

    def __init__(self) -> None:
        self._spans: deque[ReadableSpan] = deque(maxlen=KEPT)
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self._spans.extend(spans)
        return SpanExportResult.SUCCESS

    def get_finished_spans(self) -> tuple[ReadableSpan, ...]:
        with self._lock:
            return tuple(self._spans)

    def clear(self) -> None:
        with self._lock:
            self._spans.clear()


_exporter = KeptSpans()
_installed = False


def span_exporter() -> KeptSpans:
    """The process's in-memory exporter (the SDK installed on first call), cleared."""
    global _installed
    if not _installed:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
        trace.set_tracer_provider(provider)
        _installed = True
    _exporter.clear()
    return _exporter


def spans_named(exporter: KeptSpans, prefix: str) -> list[ReadableSpan]:
    """The finished spans whose name starts with ``prefix``, in the order they ended."""
    return [span for span in exporter.get_finished_spans() if span.name.startswith(prefix)]


def span_texts(exporter: KeptSpans) -> Iterator[str]:
    """Every text a span exports: names, attribute keys and values, status descriptions,
    event names and their attributes, links' attributes."""
    for span in exporter.get_finished_spans():
        yield span.name
        yield span.status.description or ""
        for key, value in (span.attributes or {}).items():
            yield f"{key}={value!r}"
        for event in span.events:
            yield event.name
            for key, value in (event.attributes or {}).items():
                yield f"{key}={value!r}"
        for link in span.links:
            for key, value in (link.attributes or {}).items():
                yield f"{key}={value!r}"


class StartedSpans:
    """Records the name of every span a tracer starts (and starts it as before)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        get_tracer = trace.get_tracer

        def recording_tracer(*args: Any, **kwargs: Any) -> trace.Tracer:
            tracer = get_tracer(*args, **kwargs)
            if getattr(tracer, "_recorded_by", None) is self:
                return tracer  # a provider may hand out the same tracer again
            tracer._recorded_by = self  # type: ignore[attr-defined]
            start = tracer.start_as_current_span

            def start_as_current_span(name: str, *more: Any, **options: Any) -> Any:
                self.names.append(name)
                return start(name, *more, **options)

            tracer.start_as_current_span = start_as_current_span  # type: ignore[method-assign]
            return tracer

        monkeypatch.setattr(trace, "get_tracer", recording_tracer)


def spans_of_a_provider_of_its_own(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """For this test, a tracer provider of its own whose finished spans the returned
    exporter holds. Only for code that asks for a tracer at each call (a2a-sdk's
    wrappers): a tracer proxy taken earlier would bind to it for good."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    return exporter
