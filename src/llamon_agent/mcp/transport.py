"""Which failures of an MCP call are the transport's (counted, maybe retried) and which
are answers (shown to the model, or escalated at once).

An MCP call's failure is classified by ``core.classify.classify_exception`` (the one table
also knows what mcp 2.3.0 reports as JSON-RPC errors although no server author chose them:
a lost HTTP session, an HTTP error status without a JSON-RPC body);
``is_transport_failure`` draws the line.
"""

from __future__ import annotations

from typing import Final

from llamon_agent._extras import requires_extra
from llamon_agent.core.classify import Classification, classify_exception
from llamon_agent.core.codes import ErrorCode

with requires_extra("mcp", "llamon_agent.mcp"):
    from mcp.shared.exceptions import MCPError

__all__ = ["classify_mcp_failure", "is_session_lost", "is_transport_failure"]


def is_session_lost(exc: BaseException) -> bool:
    """mcp's "the HTTP session is gone" (-32600 ``Session not found`` from an mcp server,
    ``Session terminated`` made by the client for a 404): reconnecting fixes it."""
    return isinstance(exc, MCPError) and classify_exception(exc).reason == "session_lost"


classify_mcp_failure: Final = classify_exception
"""``core.classify.classify_exception`` under the name this package exported first."""


def is_transport_failure(classification: Classification) -> bool:
    """A failure of the path to the server that a later call may not meet again:
    ``UPSTREAM_UNAVAILABLE`` or ``UPSTREAM_TIMEOUT`` and retriable (refused or closed
    connections, ``MCPError`` -32000/-32001, httpx2 transport errors and 5xx, timeouts)."""
    return classification.retriable and classification.code in (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        ErrorCode.UPSTREAM_TIMEOUT,
    )
