"""Calling other agents over A2A, where every failure arrives as a typed value.

Built on a2a-sdk's client (its transports and types), so it works against any A2A 0.3
server, llamon or not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llamon_agent._lazy import lazy_exports

if TYPE_CHECKING:
    from llamon_agent.client.retry import RetryKind, RetryPolicy, call_with_retry

__all__: list[str] = [
    "RetryKind",
    "RetryPolicy",
    "call_with_retry",
]

_HOMES: dict[str, str] = {
    "RetryKind": "llamon_agent.client.retry",
    "RetryPolicy": "llamon_agent.client.retry",
    "call_with_retry": "llamon_agent.client.retry",
}
"""Where each public name lives; it is loaded from there on first use."""

__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
