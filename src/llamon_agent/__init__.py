"""llamon-agent: A2A agents with MCP tools and LangGraph flows whose failures are values.

Start with ``llamon_agent.core.errors`` (codes, raise helpers),
``llamon_agent.exceptions`` (what to raise), ``GraphBuilder`` (flows) and
``llamon_agent.a2a`` (serving). ``llamon errors`` prints the tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.hitl import HITLInterrupt

if TYPE_CHECKING:
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
]

__version__ = "0.1.0"


_FLOW_NAMES = frozenset({"END", "START", "GraphBuilder"})


def __getattr__(name: str) -> Any:
    """``GraphBuilder``, ``START`` and ``END`` load LangGraph on first use, not on import
    (without ``llamon-agent[langgraph]``: an ``ImportError`` naming the extra)."""
    if name in _FLOW_NAMES:
        from llamon_agent.flow import builder

        return getattr(builder, name)
    if name == "FailureRecord":  # the error model (pydantic) loads when first used
        from llamon_agent.core.failures import FailureRecord

        return FailureRecord
    raise AttributeError(f"module 'llamon_agent' has no attribute {name!r}")
