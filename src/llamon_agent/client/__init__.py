"""Calling other agents over A2A, where every failure arrives as a typed value.

Built on a2a-sdk's client (its transports and types), so it works against any A2A 0.3
server, llamon or not.
"""

from __future__ import annotations

from llamon_agent._lazy import lazy_exports

__all__: list[str] = []

_HOMES: dict[str, str] = {}
"""Where each public name lives; it is loaded from there on first use."""

__getattr__, __dir__ = lazy_exports(__name__, _HOMES, __all__)
