"""When the loop may skip starting a span: when starting one would change nothing.

With no OpenTelemetry tracer provider installed, the API's no-op tracer answers "start a
span" with the current span itself whenever that span records nothing, and making it
current again is a no-op too. ``idle_span`` says when that is the case, so the loop's
per-call spans (``chat {model}``, ``execute_tool {tool}``) cost a check instead of a
context switch. Once a provider is installed (``trace.set_tracer_provider``, or
``OTEL_PYTHON_TRACER_PROVIDER`` read when ``core.telemetry`` got its tracer), every span
is started as ``core.telemetry`` makes it.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, Span

from llamon_agent.core.telemetry import tracer_provider_set

__all__ = ["idle_span"]


def idle_span() -> Span | None:
    """The current span when a span started now would be that same span (no tracer
    provider installed: ``core.telemetry.tracer_provider_set``; the current span records
    nothing); None when the span must be started."""
    if tracer_provider_set():
        return None
    span = trace.get_current_span()
    return span if isinstance(span, NonRecordingSpan) else None
