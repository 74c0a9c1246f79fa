"""The loop's spans: skipped only where starting one would change nothing."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    NoOpTracer,
    ProxyTracerProvider,
    Span,
    SpanContext,
    TraceFlags,
)

from llamon_agent.loop import ScriptedModel, Tool, ToolRegistry, run_loop, tool_call
from llamon_agent.loop._spans import idle_span
from tests._support.otel import span_exporter

_PARENT = NonRecordingSpan(
    SpanContext(trace_id=7, span_id=9, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
)
"""A caller's remote span: sampled, recording nothing here."""


def _without_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a process where no tracer provider was ever installed."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(trace, "get_tracer_provider", ProxyTracerProvider)


def test_without_a_provider_the_current_span_is_what_a_new_one_would_be(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without_provider(monkeypatch)
    with trace.use_span(_PARENT):
        assert idle_span() is _PARENT
        assert NoOpTracer().start_span("chat scripted") is _PARENT  # what starting gives
    assert idle_span() is trace.INVALID_SPAN


def test_with_a_provider_or_a_recording_span_the_span_is_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    span_exporter()  # the SDK's provider, installed for the process
    assert idle_span() is None
    recording = trace.get_tracer("test").start_span("caller")
    _without_provider(monkeypatch)
    with trace.use_span(recording, end_on_exit=True):
        assert idle_span() is None


async def test_a_tool_sees_the_same_current_span_either_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Span] = []

    async def probe(n: int) -> int:
        """Note the current span."""
        seen.append(trace.get_current_span())
        return n

    tools = ToolRegistry([Tool.from_function(probe)])
    model = ScriptedModel([tool_call("probe", {"n": 1}), "done"])
    exporter = span_exporter()
    with trace.use_span(_PARENT):
        outcome = await run_loop(model, tools, "go")
    assert outcome.status == "completed"
    names = [span.name for span in exporter.get_finished_spans()]
    assert names == ["chat scripted", "execute_tool probe", "chat scripted"]
    assert seen[0] is not _PARENT  # the execute_tool span, a child of the caller's
    assert seen[0].get_span_context().trace_id == _PARENT.get_span_context().trace_id

    _without_provider(monkeypatch)
    model = ScriptedModel([tool_call("probe", {"n": 2}), "done"])
    with trace.use_span(_PARENT):
        outcome = await run_loop(model, tools, "go")
    assert outcome.status == "completed"
    assert seen[1] is _PARENT  # as the no-op tracer would have made it
    assert [span.name for span in exporter.get_finished_spans()] == names  # none started


def test_without_the_apis_global_the_provider_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(trace, "_TRACER_PROVIDER")
    monkeypatch.setattr(trace, "get_tracer_provider", ProxyTracerProvider)
    with trace.use_span(_PARENT):
        assert idle_span() is _PARENT
    span_exporter()
    monkeypatch.undo()
    assert idle_span() is None
