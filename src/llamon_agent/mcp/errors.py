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

``to_dict()`` (what ``FailureRecord.from_exception`` reads) carries the same ``reason``,
``error_code`` and ``retryable`` as the classification, not the snake_case type name.

Each is raised ``from`` the original exception, which stays in the process (logs,
``__cause__``); only the short message below and the allow-listed details (``tool``,
``mcp_code``, ``attempts``) reach clients, scrubbed. Below the threshold nothing is raised:
the model gets an observation instead (see ``llamon_agent.mcp.normalizer``).
"""

from __future__ import annotations

from typing import ClassVar

from llamon_agent.core.classify import Classification, classify_exception, register_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.exceptions import ComponentInvokeError, ComponentLoadError, LlamonError
from llamon_agent.mcp.transport import classify_mcp_failure

__all__ = [
    "MCPLoadError",
    "MCPProtocolError",
    "MCPToolTimeoutError",
    "MCPToolUnavailableError",
]


def _classified(exc: LlamonError, envelope: dict[str, object]) -> dict[str, object]:
    found = classify_exception(exc)
    envelope.update(reason=found.reason, error_code=found.code.value, retryable=found.retriable)
    return envelope


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

    def to_dict(self) -> dict[str, object]:
        """The envelope, with the original failure's reason."""
        return _classified(self, super().to_dict())


class MCPToolTimeoutError(
    LlamonError, TimeoutError, code=ErrorCode.UPSTREAM_TIMEOUT, reason="timeout", retriable=True
):
    """One tool timed out ``max_transport_failures`` times in one request.

    ``UPSTREAM_TIMEOUT`` / ``timeout``, retriable. A ``TimeoutError``, so ``except
    TimeoutError`` (``asyncio.TimeoutError``) catches it; the client timeout that caused
    it (mcp's ``MCPError`` -32001, an httpx2 timeout) is its ``__cause__``.
    """

    __llamon_escalate__: ClassVar[bool] = True

    def to_dict(self) -> dict[str, object]:
        """The envelope, reason ``timeout``."""
        return _classified(self, super().to_dict())


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

    def to_dict(self) -> dict[str, object]:
        """The envelope, reason ``mcp_error``."""
        return _classified(self, super().to_dict())


class MCPLoadError(ComponentLoadError):
    """The tools of an MCP server could not be loaded (connect, handshake or ``tools/list``).

    Classified like its cause: a refused or closed connection is ``UPSTREAM_UNAVAILABLE``
    (retriable), a connect timeout ``UPSTREAM_TIMEOUT``, a JSON-RPC error ``mcp_error``
    (not retriable); a cause the table does not know (say, a stdio command that does not
    exist) gives ``UPSTREAM_UNAVAILABLE`` / ``mcp_load_failed``, not retriable.
    """

    def __init__(self, message: str, /, *, cause: BaseException, **details: object) -> None:
        super().__init__(message, **details)
        found = classify_mcp_failure(cause)
        if found.mapped:
            self.code, self.reason, self.retriable = found.code, found.reason, found.retriable
        else:
            self.code, self.reason, self.retriable = (
                ErrorCode.UPSTREAM_UNAVAILABLE,
                "mcp_load_failed",
                False,
            )

    def to_dict(self) -> dict[str, object]:
        """The envelope, classified like the cause."""
        return _classified(self, super().to_dict())


def _unavailable_rule(exc: BaseException) -> Classification | None:
    if not isinstance(exc, MCPToolUnavailableError):
        return None
    return Classification(ErrorCode.UPSTREAM_UNAVAILABLE, exc.reason, True, exc)


def _load_rule(exc: BaseException) -> Classification | None:
    if not isinstance(exc, MCPLoadError):
        return None
    return Classification(exc.code, exc.reason, exc.retriable, exc)


# These two take their reason (and, for a load, code and retriable) from the original
# failure, so they are rows of the table (content-dependent rules) rather than class keywords.
register_exception(MCPToolUnavailableError, rule=_unavailable_rule)
register_exception(MCPLoadError, rule=_load_rule)
