"""llamon-agent: A2A agents with MCP tools and LangGraph flows whose failures are values.

Start with ``llamon_agent.core.errors`` (codes, raise helpers),
``llamon_agent.exceptions`` (what to raise), ``GraphBuilder`` (flows) and
``llamon_agent.a2a`` (serving), ``llamon_agent.client`` (calling other agents;
``call_agent_stream`` and ``build_agent_context`` from a flow node). ``llamon errors``
prints the tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.hitl import HITLInterrupt

if TYPE_CHECKING:
    from llamon_agent.client.flow_helpers import build_agent_context, call_agent_stream
    from llamon_agent.core.failures import FailureRecord
    from llamon_agent.flow.builder import END, START, GraphBuilder

__all__ = [
    "END",
    "START",
    "ErrorCode",
    "FailureRecord",
    "GraphBuilder",
    "HITLInterrupt",
    "__version__",
    "build_agent_context",
    "call_agent_stream",
]

__version__ = "0.1.0"


_FLOW_NAMES = frozenset({"END", "START", "GraphBuilder"})
_CLIENT_NAMES = frozenset({"build_agent_context", "call_agent_stream"})


def __getattr__(name: str) -> Any:
    """``GraphBuilder``, ``START`` and ``END`` load LangGraph on first use, not on import
    (without ``llamon-agent[langgraph]``: an ``ImportError`` naming the extra);
    ``call_agent_stream`` and ``build_agent_context`` load the client likewise."""
    if name in _FLOW_NAMES:
        from llamon_agent.flow import builder

        return getattr(builder, name)
    if name == "FailureRecord":  # the error model (pydantic) loads when first used
        from llamon_agent.core.failures import FailureRecord

        return FailureRecord
    if name in _CLIENT_NAMES:  # a2a-sdk's client loads when a flow first calls an agent
        from llamon_agent.client import flow_helpers

        return getattr(flow_helpers, name)
    raise AttributeError(f"module 'llamon_agent' has no attribute {name!r}")
