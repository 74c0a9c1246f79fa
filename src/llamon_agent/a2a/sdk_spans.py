"""a2a-sdk's server classes llamon derives from, with their spans checked.

Each is ``llamon_agent.client.sdk_spans.spans_only_when_traced`` applied to an a2a-sdk
class: its spans are started only while a tracer provider is configured, and an
exception is recorded by its classified reason, never its text. ``LlamonRequestHandler``,
the JSON-RPC handler, the run queues and ``LlamonQueueManager`` derive from them, so their
``super()`` calls and a2a-sdk's calls on ``self`` both reach the check.
"""

from __future__ import annotations

from a2a.server.events import EventQueue, InMemoryQueueManager
from a2a.server.request_handlers import DefaultRequestHandler, JSONRPCHandler

from llamon_agent.client.sdk_spans import spans_only_when_traced

__all__ = ["SdkEventQueue", "SdkJSONRPCHandler", "SdkQueueManager", "SdkRequestHandler"]


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
