"""The exceptions ``llamon_agent.mcp`` raises, and what each becomes on the wire::

    ComponentError
     ├── ComponentInvokeError
     │    ├── MCPToolUnavailableError   3rd transport failure of one tool in one request
     │    │                             UPSTREAM_UNAVAILABLE, the original's reason
     │    │                             (connection_closed, network_error, http_5xx), retriable
     │    └── MCPProtocolError          the server answered a JSON-RPC error (MCPError)
     │                                  UPSTREAM_UNAVAILABLE, mcp_error, NOT retriable
     └── ComponentLoadError
          └── MCPLoadError              connecting to / listing the server failed
                                        classified like its cause (timeout, network_error, ...)
    LlamonError + TimeoutError
     └── MCPToolTimeoutError           3rd timeout of one tool in one request
                                        UPSTREAM_TIMEOUT, timeout, retriable

The three raised while calling a tool carry ``__llamon_escalate__ = True``: a tool loop
that turns a tool's exceptions into observations must let these through (they
end the request, classified, instead of going back to the model).

Each carries its classification itself (class keywords, or ``carried`` when it depends
on the original failure), so the one table and ``to_dict()`` (what
``FailureRecord.from_exception`` reads) give the same ``reason``, ``error_code`` and
``retryable``, not the snake_case type name.

Each is raised ``from`` the original exception, which stays in the process (logs,
``__cause__``); only the short message below and the allow-listed details (``tool``,
``mcp_code``, ``attempts``) reach clients, scrubbed. Below the threshold nothing is raised:
the model gets an observation instead (see ``llamon_agent.mcp.normalizer``).
"""

from __future__ import annotations

from typing import ClassVar

from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode, ErrorRule
from llamon_agent.exceptions import ComponentInvokeError, ComponentLoadError, LlamonError

__all__ = [
    "MCPLoadError",
    "MCPProtocolError",
    "MCPToolTimeoutError",
    "MCPToolUnavailableError",
]


class MCPToolUnavailableError(ComponentInvokeError):
    """One tool's transport failed ``max_transport_failures`` times in one request.

    ``UPSTREAM_UNAVAILABLE``, retriable; ``errorReason`` is the reason of the last
    original failure (``connection_closed``, ``network_error``, ``http_5xx`` ...), which is
    also this exception's ``__cause__``.
    """

    __llamon_escalate__: ClassVar[bool] = True

    def __init__(self, message: str, /, *, reason: str, **details: object) -> None:
        super().__init__(message, **details)
        self.reason = reason

    @property
    def carried(self) -> ErrorRule:
        """``UPSTREAM_UNAVAILABLE``, the original failure's reason, retriable."""
        return ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, self.reason, True)


class MCPToolTimeoutError(
    LlamonError, TimeoutError, code=ErrorCode.UPSTREAM_TIMEOUT, reason="timeout", retriable=True
):
    """One tool timed out ``max_transport_failures`` times in one request.

    ``UPSTREAM_TIMEOUT`` / ``timeout``, retriable. A ``TimeoutError``, so ``except
    TimeoutError`` (``asyncio.TimeoutError``) catches it; the client timeout that caused
    it (mcp's ``MCPError`` -32001, an httpx2 timeout) is its ``__cause__``.
    """

    __llamon_escalate__: ClassVar[bool] = True


class MCPProtocolError(
    ComponentInvokeError, code=ErrorCode.UPSTREAM_UNAVAILABLE, reason="mcp_error", retriable=False
):
    """The MCP server refused a ``tools/call`` with a JSON-RPC error (``mcp.MCPError``).

    A tool raises ``MCPError`` when no model could have avoided the failure, so
    the model never sees it; it escalates at once. ``UPSTREAM_UNAVAILABLE`` /
    ``mcp_error``, *not* retriable (neither the model nor a blind retry fixes it);
    ``details['mcp_code']`` is the JSON-RPC code. The server's message stays in the
    ``__cause__`` (logs), not in this exception's text.
    """

    __llamon_escalate__: ClassVar[bool] = True

    def __init__(self, message: str, /, *, mcp_code: int | None = None, **details: object) -> None:
        super().__init__(message, mcp_code=mcp_code, **details)
        self.mcp_code = mcp_code


class MCPLoadError(ComponentLoadError):
    """The tools of an MCP server could not be loaded (connect, handshake or ``tools/list``).

    Classified like its cause: a refused or closed connection is ``UPSTREAM_UNAVAILABLE``
    (retriable), a connect timeout ``UPSTREAM_TIMEOUT``, a JSON-RPC error ``mcp_error``
    (not retriable); a cause the table does not know (say, a stdio command that does not
    exist) gives ``UPSTREAM_UNAVAILABLE`` / ``mcp_load_failed``, not retriable.
    """

    def __init__(self, message: str, /, *, cause: BaseException, **details: object) -> None:
        super().__init__(message, **details)
        found = classify_exception(cause)
        if found.mapped:
            self.code, self.reason, self.retriable = found.code, found.reason, found.retriable
        else:
            self.code, self.reason, self.retriable = (
                ErrorCode.UPSTREAM_UNAVAILABLE,
                "mcp_load_failed",
                False,
            )

    @property
    def carried(self) -> ErrorRule:
        """Classified like the cause (see the class docstring)."""
        return ErrorRule(self.code, self.reason, self.retriable)
