"""a2a-sdk's per-call spans: started only while a tracer provider is configured, and never
with an exception's text.

a2a-sdk wraps each method of its client transports, request handlers, event queue and
queue manager in an OpenTelemetry span (``a2a.utils.telemetry.trace_class``). Without a
tracer provider those spans record nothing, yet starting one costs a few microseconds, and
a blocking ``message/send`` passes through about twenty of them. With one, a2a-sdk records an
exception that leaves a method as an ``exception`` event -- its message and traceback,
chained causes included, such as a task store driver's error naming its host -- and as
the span's status description: outside the security boundary (a client transport's
connection error names the called agent's address).

``spans_only_when_traced`` is the one place llamon handles both: applied to a direct
subclass of an a2a-sdk class, it gives the subclass a method for each traced one it
inherits. While no provider is set, it calls the bare method. Once one is, it starts the
span a2a-sdk would (the same name, kind and tracer, read from a2a-sdk's wrapper), status
OK on return; an exception is marked by the failure rule of ``core.telemetry`` -- status
ERROR described by its classified reason, ``error.type``, ``llamon.error_code``,
``llamon.stage`` -- and nothing of its text is recorded. The check is made at every call,
so a provider installed later is traced from its next call. (A wrapper of a shape this
module does not know -- another a2a-sdk version -- is called as it is.)

llamon uses such classes only: ``SdkJsonRpcTransport`` here (``AgentClient``, the Quality
Lab's runner), and the server's in ``llamon_agent.a2a.sdk_spans`` (``LlamonRequestHandler``
derives from ``SdkRequestHandler`` ...), so their ``super()`` calls and a2a-sdk's calls on
``self`` both reach the check.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.utils import telemetry as _sdk_telemetry
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from llamon_agent.core.telemetry import mark_exception, tracer_provider_set

__all__ = ["SdkJsonRpcTransport", "spans_only_when_traced"]

_T = TypeVar("_T", bound=type)

_SDK_WRAPPERS = _sdk_telemetry.__file__
"""The file of a2a-sdk's tracing wrappers: a method whose code lives there is one."""


def _bare(method: object) -> Callable[..., Any] | None:
    """The function a2a-sdk's tracing wrapper ``method`` wraps, or None when ``method`` is
    no such wrapper."""
    code = getattr(method, "__code__", None)
    bare = getattr(method, "__wrapped__", None)
    if code is None or bare is None or code.co_filename != _SDK_WRAPPERS:
        return None
    return bare  # type: ignore[no-any-return]


def _span_of(traced: Callable[..., Any]) -> tuple[str, SpanKind] | None:
    """The name and kind of the span a2a-sdk's wrapper ``traced`` starts, read from it;
    None when it is of a shape this module does not copy (attributes, an extractor)."""
    cells = dict(zip(traced.__code__.co_freevars, traced.__closure__ or (), strict=False))
    try:
        name = cells["actual_span_name"].cell_contents
        kind = cells["kind"].cell_contents
        extras = cells["attributes"].cell_contents, cells["attribute_extractor"].cell_contents
    except (KeyError, ValueError):  # not there, or an empty cell
        return None
    if not isinstance(name, str) or not isinstance(kind, SpanKind) or any(extras):
        return None
    return name, kind


@contextlib.contextmanager
def _sdk_span(name: str, kind: SpanKind) -> Iterator[None]:
    """a2a-sdk's span ``name``: status OK on return; an exception marked by its classified
    reason (``core.telemetry.mark_exception``), its text never recorded."""
    tracer = trace.get_tracer(
        _sdk_telemetry.INSTRUMENTING_MODULE_NAME, _sdk_telemetry.INSTRUMENTING_MODULE_VERSION
    )
    with tracer.start_as_current_span(
        name, kind=kind, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield
        except Exception as exc:
            mark_exception(span, exc)
            raise
        span.set_status(Status(StatusCode.OK))


def _checked(traced: Callable[..., Any], bare: Callable[..., Any]) -> Callable[..., Any]:
    """A method calling ``bare`` inside a2a-sdk's span while a tracer provider is set (or
    ``traced`` itself, a wrapper of a shape not copied), else ``bare`` alone."""
    span = _span_of(traced)
    if inspect.iscoroutinefunction(traced):

        async def call_async(*args: Any, **kwargs: Any) -> Any:
            if not tracer_provider_set():
                return await bare(*args, **kwargs)
            if span is None:
                return await traced(*args, **kwargs)
            with _sdk_span(*span):
                return await bare(*args, **kwargs)

        chosen: Callable[..., Any] = call_async
    else:

        def call(*args: Any, **kwargs: Any) -> Any:
            if not tracer_provider_set():
                return bare(*args, **kwargs)
            if span is None:
                return traced(*args, **kwargs)
            with _sdk_span(*span):
                return bare(*args, **kwargs)

        chosen = call
    return functools.update_wrapper(chosen, bare)


def spans_only_when_traced(cls: _T) -> _T:
    """Give ``cls`` a checked method (see the module docstring) for each method it inherits
    that a2a-sdk traces and it does not define itself; returns ``cls``."""
    for name, member in inspect.getmembers(cls, inspect.isfunction):
        if name in cls.__dict__:
            continue
        bare = _bare(member)
        if bare is not None:
            setattr(cls, name, _checked(member, bare))
    return cls


@spans_only_when_traced
class SdkJsonRpcTransport(JsonRpcTransport):
    """a2a-sdk's ``JsonRpcTransport``, its spans started only while traced, never with an
    exception's text."""
