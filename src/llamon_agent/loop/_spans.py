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

from typing import Final

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, ProxyTracerProvider, Span

__all__ = ["idle_span"]

_UNREADABLE: Final = object()


def idle_span() -> Span | None:
    """The current span when a span started now would be that same span (no tracer
    provider installed, the current span records nothing); None when the span must be
    started.

    "No provider installed" is what the API's proxy tracer reads to choose its no-op
    tracer (the API's global provider is unset), or ``get_tracer_provider`` answering its
    proxy when that global is not readable.
    """
    installed = getattr(trace, "_TRACER_PROVIDER", _UNREADABLE)
    if installed is _UNREADABLE:
        if not isinstance(trace.get_tracer_provider(), ProxyTracerProvider):
            return None
    elif installed is not None:
        return None
    span = trace.get_current_span()
    return span if isinstance(span, NonRecordingSpan) else None
