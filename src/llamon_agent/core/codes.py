"""The fixed vocabulary clients branch on: `ErrorCode`, and the JSON-RPC code table.

`ErrorCode` has exactly eight values. A client decides what to do next from the code
alone (retry, show an input form, ask for login, start a new task); the finer
`errorReason` is for logs, dashboards and i18n keys, never for branching.

JSON-RPC and A2A 0.3 error codes map onto the same vocabulary, so a caller that receives
a protocol-level error branches the same way as on an application-level failure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from types import MappingProxyType
from typing import Final

__all__ = [
    "DEFAULT_MESSAGES",
    "ERROR_CODE_TABLE",
    "JSON_RPC_CODE_TO_ERROR_CODE",
    "ErrorCode",
    "ErrorCodeSpec",
    "ErrorRule",
    "Stage",
    "json_rpc_to_error_code",
    "snake_case",
]


class ErrorCode(StrEnum):
    """The eight error codes; the string value is what travels on the wire."""

    INVALID_INPUT = "INVALID_INPUT"
    """Input missing, malformed or not matching the schema. Fix the request; do not retry as is."""
    AUTH_REQUIRED = "AUTH_REQUIRED"
    """Authentication or permission needed, or a token expired. Log in, then retry."""
    NOT_FOUND = "NOT_FOUND"
    """The task expired or a resource does not exist. Start over; do not retry as is."""
    UPSTREAM_UNAVAILABLE = "UPSTREAM_UNAVAILABLE"
    """An MCP server, RAG index, database or model failed. Often retriable."""
    UPSTREAM_TIMEOUT = "UPSTREAM_TIMEOUT"
    """An external dependency timed out. Retriable with backoff."""
    RATE_LIMITED = "RATE_LIMITED"
    """A quota or rate limit was hit. Retry after `retryAfterMs`, or back off exponentially."""
    GUARDRAIL_BLOCKED = "GUARDRAIL_BLOCKED"
    """Blocked for safety or compliance. The task's artifacts are withheld; see `data.guardrail`."""
    INTERNAL_ERROR = "INTERNAL_ERROR"
    """Anything unknown (the fallback). Report the incident id; retrying rarely helps."""


JSON_RPC_CODE_TO_ERROR_CODE: Final[MappingProxyType[int, ErrorCode]] = MappingProxyType(
    {
        # JSON-RPC 2.0
        -32700: ErrorCode.INVALID_INPUT,  # parse error: the body is not JSON
        -32600: ErrorCode.INVALID_INPUT,  # invalid request object
        -32601: ErrorCode.INVALID_INPUT,  # method not found: the caller asked for a path we lack
        -32602: ErrorCode.INVALID_INPUT,  # invalid params
        -32603: ErrorCode.INTERNAL_ERROR,  # internal error
        # A2A 0.3
        -32001: ErrorCode.NOT_FOUND,  # TaskNotFoundError: expired, evicted or never existed
        -32002: ErrorCode.INVALID_INPUT,  # TaskNotCancelableError: the task already ended
        -32003: ErrorCode.INVALID_INPUT,  # PushNotificationNotSupportedError
        -32004: ErrorCode.INVALID_INPUT,  # UnsupportedOperationError
        -32005: ErrorCode.INVALID_INPUT,  # ContentTypeNotSupportedError
        -32006: ErrorCode.INTERNAL_ERROR,  # InvalidAgentResponseError: the agent misbehaved
        -32007: ErrorCode.NOT_FOUND,  # AuthenticatedExtendedCardNotConfiguredError
        # llamon-agent (server-defined range)
        -32040: ErrorCode.AUTH_REQUIRED,  # unauthenticated call (HTTP 401)
        -32041: ErrorCode.RATE_LIMITED,  # task_busy: the task is running a request already
    }
)
"""JSON-RPC / A2A 0.3 numeric error code -> `ErrorCode`. Read-only."""


def json_rpc_to_error_code(jsonrpc_code: int) -> ErrorCode:
    """Return the `ErrorCode` for a JSON-RPC error code.

    Codes outside the table (including the rest of the -32000..-32099 server range) give
    `INTERNAL_ERROR`.
    """
    return JSON_RPC_CODE_TO_ERROR_CODE.get(jsonrpc_code, ErrorCode.INTERNAL_ERROR)


class Stage(StrEnum):
    """Where a failure happened (the workflow stages, then the ones this SDK adds)."""

    RETRIEVE = "retrieve"
    SELECT_TARGET = "select_target"
    SYNTHESIZE = "synthesize"
    BIND_REQUEST = "bind_request"
    AUTH_PREFLIGHT = "auth_preflight"
    EXECUTE = "execute"
    CLEANUP = "cleanup"
    LEARN = "learn"
    SERVICE = "service"
    # added by llamon-agent
    MODEL_CALL = "model_call"
    """Calling a language model (provider errors, empty or unusable responses)."""
    TOOL_LOOP = "tool_loop"
    """The native tool-calling loop: dispatch, argument parsing, round limits."""
    MCP_CALL = "mcp_call"
    """Calling a tool on an MCP server."""
    FLOW_NODE = "flow_node"
    """Running a node of a LangGraph / GraphBuilder flow."""
    GUARDRAIL = "guardrail"
    """A safety or compliance check."""
    A2A_SERVE = "a2a_serve"
    """Serving an A2A request: validation, the task life cycle, stores."""
    A2A_CALL = "a2a_call"
    """Calling another agent over A2A."""


@dataclass(frozen=True, slots=True)
class ErrorRule:
    """What an exception type becomes: its `ErrorCode`, `errorReason` and `retriable`.

    `reason=None` means "the snake_case of the raised exception's type name", so a
    subclass gets its own reason (``BankLookupError`` -> ``bank_lookup_error``).
    """

    code: ErrorCode
    reason: str | None = None
    retriable: bool = False


_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z0-9])(?=[A-Z][a-z])")


@lru_cache(maxsize=1024)
def snake_case(name: str) -> str:
    """``MissingAPIKeyError`` -> ``missing_api_key_error``; used for fallback reasons
    (remembered per name: the same exception types fail again and again)."""
    return _CAMEL_BOUNDARY.sub("_", name).replace("-", "_").lower()


@dataclass(frozen=True, slots=True)
class ErrorCodeSpec:
    """What one `ErrorCode` means, in every place it is explained.

    ``message`` is the plain sentence a client is shown when an error has no message of its
    own; ``meaning`` and ``client_action`` are what ``llamon errors`` and docs/errors.md
    print; ``operator_action`` is a failure record's action when its reason is not in the
    catalog.
    """

    code: ErrorCode
    message: str
    meaning: str
    client_action: str
    operator_action: str


ERROR_CODE_TABLE: Final[tuple[ErrorCodeSpec, ...]] = (
    ErrorCodeSpec(
        ErrorCode.INVALID_INPUT,
        "The request was not valid.",
        "input missing, malformed or off-schema",
        "fix the request; do not retry it as is",
        "fix_request_input",
    ),
    ErrorCodeSpec(
        ErrorCode.AUTH_REQUIRED,
        "Authentication is required.",
        "authentication or permission needed, token expired",
        "log in / refresh, then retry",
        "refresh_or_configure_credentials",
    ),
    ErrorCodeSpec(
        ErrorCode.NOT_FOUND,
        "The requested resource was not found.",
        "task expired or resource absent",
        "start over",
        "check_resource_exists",
    ),
    ErrorCodeSpec(
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "A service this agent depends on is unavailable.",
        "MCP / RAG / DB / LLM failure",
        "retry when retriable",
        "check_upstream_health",
    ),
    ErrorCodeSpec(
        ErrorCode.UPSTREAM_TIMEOUT,
        "A service this agent depends on timed out.",
        "an external dependency timed out",
        "retry with backoff",
        "check_upstream_latency_or_timeout",
    ),
    ErrorCodeSpec(
        ErrorCode.RATE_LIMITED,
        "Too many requests; try again later.",
        "quota or rate limit",
        "wait retryAfterMs, else back off exponentially",
        "back_off_or_raise_quota",
    ),
    ErrorCodeSpec(
        ErrorCode.GUARDRAIL_BLOCKED,
        "The request was blocked by a safety policy.",
        "blocked for safety or compliance; the task's artifacts are withheld",
        "show data.guardrail.violationCategory",
        "review_guardrail_policy",
    ),
    ErrorCodeSpec(
        ErrorCode.INTERNAL_ERROR,
        "The agent failed unexpectedly.",
        "anything unknown (the fallback)",
        "report the incidentId",
        "inspect_server_log_by_incident_id",
    ),
)
"""One row per `ErrorCode`, in enum order: the only place its texts are written."""

DEFAULT_MESSAGES: Final[MappingProxyType[ErrorCode, str]] = MappingProxyType(
    {spec.code: spec.message for spec in ERROR_CODE_TABLE}
)
"""A plain sentence per code: display text when an error has no message to show
(``ERROR_CODE_TABLE``'s ``message``)."""
