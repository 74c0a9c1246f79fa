"""a2a-sdk's per-call spans, started only while a tracer provider is configured.

a2a-sdk wraps each method of its request handlers, event queue and queue manager in an
OpenTelemetry span (``a2a.utils.telemetry.trace_class``). Without a tracer provider those
spans record nothing, yet starting one costs a few microseconds, and a blocking
``message/send`` passes through about twenty of them. ``spans_only_when_traced`` is the one
place llamon turns that off: applied to a direct subclass of an a2a-sdk class, it gives the
subclass a method for each traced one it inherits, which calls the bare method while no
provider is set and a2a-sdk's traced one -- the same span, as before -- once one is. The
check is made at every call, so a provider installed later is traced from its next call.

llamon's subclasses derive from such a class (``LlamonRequestHandler`` from
``SdkRequestHandler`` ...), so their ``super()`` calls and a2a-sdk's calls on ``self`` both
reach the check.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from a2a.server.events import EventQueue, InMemoryQueueManager
from a2a.server.request_handlers import DefaultRequestHandler, JSONRPCHandler
from a2a.utils import telemetry as _sdk_telemetry

from llamon_agent.core.telemetry import tracer_provider_set

__all__ = [
    "SdkEventQueue",
    "SdkJSONRPCHandler",
    "SdkQueueManager",
    "SdkRequestHandler",
    "spans_only_when_traced",
]

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


def _checked(traced: Callable[..., Any], bare: Callable[..., Any]) -> Callable[..., Any]:
    """A method calling ``traced`` while a tracer provider is set, else ``bare``."""
    if inspect.iscoroutinefunction(traced):

        async def call_async(*args: Any, **kwargs: Any) -> Any:
            if tracer_provider_set():
                return await traced(*args, **kwargs)
            return await bare(*args, **kwargs)

        chosen: Callable[..., Any] = call_async
    else:

        def call(*args: Any, **kwargs: Any) -> Any:
            if tracer_provider_set():
                return traced(*args, **kwargs)
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
class SdkRequestHandler(DefaultRequestHandler):
    """a2a-sdk's ``DefaultRequestHandler``, its spans started only while traced."""


@spans_only_when_traced
class SdkJSONRPCHandler(JSONRPCHandler):
    """a2a-sdk's ``JSONRPCHandler``, its spans started only while traced."""


@spans_only_when_traced
class SdkEventQueue(EventQueue):
    """a2a-sdk's ``EventQueue``, its spans started only while traced."""


@spans_only_when_traced
class SdkQueueManager(InMemoryQueueManager):
    """a2a-sdk's ``InMemoryQueueManager``, its spans started only while traced."""
