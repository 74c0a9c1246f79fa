"""Which failures of an MCP call are the transport's (counted, maybe retried) and which
are answers (shown to the model, or escalated at once).

``classify_mcp_failure`` is ``core.classify.classify_exception`` plus two things mcp 2.3.0
reports as JSON-RPC errors although no server author chose them: a lost HTTP session and
an HTTP error status without a JSON-RPC body. ``is_transport_failure`` draws the line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_REQUEST

from llamon_agent.core.classify import Classification, classify_exception
from llamon_agent.core.codes import ErrorCode

__all__ = ["classify_mcp_failure", "is_session_lost", "is_transport_failure"]

# Errors mcp 2.3.0's streamable HTTP client and server make up themselves (not a tool's
# or a server author's answer): the HTTP session is gone (the server restarted, the session
# expired) or the HTTP layer failed (a 5xx/4xx with no JSON-RPC body, e.g. a proxy's 503).
_SESSION_LOST: Final = frozenset({"Session not found", "Session terminated"})
_HTTP_FAILED: Final = "Server returned an error response"


def is_session_lost(exc: BaseException) -> bool:
    """mcp's "the HTTP session is gone" (-32600 ``Session not found`` from an mcp server,
    ``Session terminated`` made by the client for a 404): reconnecting fixes it."""
    return (
        isinstance(exc, MCPError)
        and exc.code == INVALID_REQUEST
        and exc.message in _SESSION_LOST
        and exc.error.data is None
    )


def _made_up_by_mcp(exc: BaseException) -> Classification | None:
    if is_session_lost(exc):
        return Classification(ErrorCode.UPSTREAM_UNAVAILABLE, "session_lost", True, exc)
    if (
        isinstance(exc, MCPError)
        and exc.code == INTERNAL_ERROR
        and exc.message == _HTTP_FAILED
        and exc.error.data is None
    ):
        return Classification(ErrorCode.UPSTREAM_UNAVAILABLE, "http_error", True, exc)
    return None


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for inner in group.exceptions:
        if isinstance(inner, BaseExceptionGroup):
            yield from _leaves(inner)
        else:
            yield inner


def classify_mcp_failure(exc: BaseException) -> Classification:
    """``classify_exception``, plus what mcp 2.3.0 reports as a JSON-RPC error although
    the transport failed: a lost HTTP session (``session_lost``) and an HTTP error status
    without a JSON-RPC body (``http_error``); both ``UPSTREAM_UNAVAILABLE``, retriable.
    Exception groups (a failed connect) are classified by their first leaf that says
    something, as ``classify_exception`` does."""
    if isinstance(exc, BaseExceptionGroup):
        for leaf in _leaves(exc):
            found = _made_up_by_mcp(leaf) or classify_exception(leaf)
            if found.mapped:
                return found
        return classify_exception(exc)
    return _made_up_by_mcp(exc) or classify_exception(exc)


def is_transport_failure(classification: Classification) -> bool:
    """A failure of the path to the server that a later call may not meet again:
    ``UPSTREAM_UNAVAILABLE`` or ``UPSTREAM_TIMEOUT`` and retriable (refused or closed
    connections, ``MCPError`` -32000/-32001, httpx2 transport errors and 5xx, timeouts)."""
    return classification.retriable and classification.code in (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        ErrorCode.UPSTREAM_TIMEOUT,
    )
