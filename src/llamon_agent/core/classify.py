"""The one table that turns an exception into ``(ErrorCode, errorReason, retriable)``.

Look here to learn how any failure is classified. A ``LlamonError`` that carries its own
answer (``carried``: ``LlamonApplicationError``, the MCP escalations) is read by one rule
first. Otherwise, for the raised exception's type and then each base class in MRO order,
the first match wins:

1. a rule the class declares itself (``__llamon_error__``, set by
   ``class X(LlamonError, code=...)`` or assigned on any exception class);
2. a rule registered for the class object (``register_exception``), the built-in table
   below included;
3. a rule registered by dotted name ``"<top-level package>.<QualName>"`` -- how
   ``httpx2``, ``langgraph`` and ``mcp`` types are matched without importing them.

A *generic wrapper* row (``ComponentInvokeError``, ``ComponentLoadError``, a2a-sdk's
``A2AClientHTTPError``) yields to a more specific cause: when the exception was raised
``from`` another (its ``__cause__``), the nearest cause in that chain that a row of its own
maps decides code, reason, retriable and ``retryAfterMs`` (other generic wrappers in the
chain are looked through; an unmapped cause, or one that carries its own answer --
``LlamonApplicationError``, ``GuardrailBlockedError`` -- stops the search). So
``raise ComponentInvokeError("bank lookup failed: ...") from http_status_error`` is
``RATE_LIMITED`` for a 429 and ``AUTH_REQUIRED`` for a 401. The wrapper's own text stays
the message (unless the cause's row withholds text); only an explicit ``raise ... from``
counts, never the implicit ``__context__``.

An ``ExceptionGroup`` is classified by its first leaf exception the table maps (the most
specific cause), or by its first leaf when none is mapped. Anything unmatched is the
fallback: ``INTERNAL_ERROR``, reason = snake_case of the type name, not retriable, and
``mapped=False`` -- its text then stays inside the process (see ``core.messages``).

The retries already made for the failing call (a provider adapter's, recorded with
``mark_retried``) travel with the classification as ``retried``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from llamon_agent.core.codes import (
    JSON_RPC_CODE_TO_ERROR_CODE,
    ErrorCode,
    ErrorRule,
    snake_case,
)
from llamon_agent.core.retry_after import parse_retry_after_ms, read_retry_after_ms
from llamon_agent.exceptions import (
    A2AProtocolError,
    ComponentInvokeError,
    ComponentLoadError,
    ConfigValidationError,
    GuardrailBlockedError,
    LlamonApplicationError,
    LlamonError,
    MaxIterationError,
    MergeStrategyError,
    MissingAPIKeyError,
    MissingFieldError,
    RegistryNotFoundError,
    RegistryTimeoutError,
    RegistryUnauthorizedError,
    RoutingError,
)

__all__ = [
    "BUILTIN_RULES",
    "Classification",
    "DynamicRule",
    "Rule",
    "RuleRow",
    "YieldingRule",
    "classify_exception",
    "mark_retried",
    "parse_retry_after_ms",
    "python_exc_to_error_code",
    "register_exception",
    "registered_rules",
    "unregister_exception",
]


logger = logging.getLogger("llamon_agent.errors")


@dataclass(frozen=True, slots=True)
class Classification:
    """How one exception was classified.

    ``exception`` is the exception the rule matched (an inner one for exception groups);
    ``mapped`` is False only for the INTERNAL_ERROR fallback; ``expose_text`` is False for
    mapped exceptions whose text is known to carry request data (provider SDK errors echo
    keys and prompts): their message is the code's plain sentence instead. ``message``,
    when set, is the SDK's own sentence a client gets instead of the exception's text
    (a recursion limit's developer hint is not for callers). ``http_status`` is the
    upstream's HTTP status when one decided; ``cause`` is the inner exception whose row
    decided when a generic wrapper yielded to it (``exception`` is then the wrapper);
    ``generic`` is True when only a generic wrapper's own row matched; ``retried`` counts
    the retries already made for the failing call.
    """

    code: ErrorCode
    reason: str
    retriable: bool
    exception: BaseException
    mapped: bool = True
    retry_after_ms: int | None = None
    expose_text: bool = True
    message: str | None = None
    http_status: int | None = None
    cause: BaseException | None = None
    generic: bool = False
    retried: int = 0

    def as_tuple(self) -> tuple[ErrorCode, str, bool]:
        """``(code, reason, retriable)``, the shape of ``python_exc_to_error_code``."""
        return (self.code, self.reason, self.retriable)


DynamicRule = Callable[[BaseException], Classification | None]
"""A rule that inspects the exception (a status, a code); ``None`` defers to the next base."""
Rule = ErrorRule | DynamicRule
Key = type[BaseException] | str


@dataclass(frozen=True, slots=True)
class RuleRow:
    """One row of the printed table: what matches, what it becomes, and a note."""

    key: str
    code: str
    reason: str
    retriable: str
    note: str = ""


def _retry_after(response: object) -> int | None:
    """``retry-after-ms`` (OpenAI, Anthropic) or ``Retry-After`` of a response, in ms."""
    return read_retry_after_ms(getattr(response, "headers", None))


def _sdk_status(exc: BaseException) -> Classification | None:
    """A provider SDK's status error: by status, with its text withheld (it echoes keys)."""
    found = _http_status(exc)
    return None if found is None else dataclasses.replace(found, expose_text=False)


def _hidden(rule: ErrorRule) -> DynamicRule:
    def apply(exc: BaseException) -> Classification:
        reason = rule.reason or snake_case(type(exc).__name__)
        return Classification(rule.code, reason, rule.retriable, exc, expose_text=False)

    return apply


def _by_status(status: int, response: object, exc: BaseException) -> Classification:
    """The row for an upstream's HTTP ``status`` (``response`` supplies ``Retry-After``)."""
    if status == 429:
        return Classification(
            ErrorCode.RATE_LIMITED,
            "rate_limited",
            True,
            exc,
            retry_after_ms=_retry_after(response),
            http_status=status,
        )
    if status in (401, 403):
        row = (ErrorCode.AUTH_REQUIRED, "auth_failed", False)
    elif status in (404, 410):
        row = (ErrorCode.NOT_FOUND, "http_not_found", False)
    elif status == 408:
        row = (ErrorCode.UPSTREAM_TIMEOUT, "timeout", True)
    elif status >= 500:
        row = (ErrorCode.UPSTREAM_UNAVAILABLE, "http_5xx", True)
    else:
        row = (ErrorCode.UPSTREAM_UNAVAILABLE, "http_4xx", False)
    return Classification(*row, exc, http_status=status)


def _http_status(exc: BaseException) -> Classification | None:
    """httpx / httpx2 ``HTTPStatusError`` by status code."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if not isinstance(status, int):
        return None
    return _by_status(status, response, exc)


def _a2a_http_status(exc: BaseException) -> Classification | None:
    """a2a-sdk's ``A2AClientHTTPError`` by its ``status_code`` (a network failure is 503)."""
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or isinstance(status, bool):
        return None
    return _by_status(status, None, exc)


_REMOTE_REASON: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")
_REMOTE_PASSED: Final = frozenset(
    {
        ErrorCode.AUTH_REQUIRED,
        ErrorCode.NOT_FOUND,
        ErrorCode.RATE_LIMITED,
        ErrorCode.UPSTREAM_TIMEOUT,
        ErrorCode.UPSTREAM_UNAVAILABLE,
    }
)
"""Codes of a called agent's answer that mean the same to our caller; the others
(its ``INVALID_INPUT``, ``INTERNAL_ERROR``, ``GUARDRAIL_BLOCKED``) are our upstream failing."""


def _a2a_jsonrpc(exc: BaseException) -> Classification | None:
    """a2a-sdk's ``A2AClientJSONRPCError``: the called agent answered a JSON-RPC error.

    Its ``error.data`` in this SDK's shape (``errorCode``, ``retriable``, ``retryAfterMs``)
    is honoured; otherwise the JSON-RPC code decides: task not found -> ``NOT_FOUND``, an
    internal or server error -> ``UPSTREAM_UNAVAILABLE`` retriable, a refused request
    (parse, params, unsupported) -> ``UPSTREAM_UNAVAILABLE`` not retriable.
    """
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None)
    if not isinstance(code, int) or isinstance(code, bool):
        return None
    data = getattr(error, "data", None)
    remote = data.get("errorCode") if isinstance(data, Mapping) else None
    if isinstance(data, Mapping) and isinstance(remote, str) and remote in ErrorCode.__members__:
        remote_code = ErrorCode(remote)
        retriable = data.get("retriable") is True
        after = data.get("retryAfterMs")
        retry_after = after if isinstance(after, int) and not isinstance(after, bool) else None
        reason = data.get("errorReason")
        if remote_code in _REMOTE_PASSED:
            if not (isinstance(reason, str) and _REMOTE_REASON.fullmatch(reason)):
                reason = None
            return Classification(
                remote_code,
                reason or "a2a_upstream_error",
                retriable,
                exc,
                retry_after_ms=retry_after if retry_after is None or retry_after >= 0 else None,
                message=f"The called agent answered JSON-RPC error {code} ({remote_code.value}).",
            )
        failed = "a2a_request_rejected" if remote_code is ErrorCode.INVALID_INPUT else None
        return Classification(
            ErrorCode.UPSTREAM_UNAVAILABLE,
            failed or "a2a_upstream_error",
            retriable,
            exc,
            message=f"The called agent answered JSON-RPC error {code} ({remote_code.value}).",
        )
    message = f"The called agent answered JSON-RPC error {code}."
    mapped = JSON_RPC_CODE_TO_ERROR_CODE.get(code)
    if mapped is ErrorCode.NOT_FOUND:
        return Classification(
            ErrorCode.NOT_FOUND, "a2a_task_not_found", False, exc, message=message
        )
    if mapped is None or mapped is ErrorCode.INTERNAL_ERROR:
        return Classification(
            ErrorCode.UPSTREAM_UNAVAILABLE, "a2a_upstream_error", True, exc, message=message
        )
    return Classification(
        ErrorCode.UPSTREAM_UNAVAILABLE, "a2a_request_rejected", False, exc, message=message
    )


_MCP_CONNECTION_CLOSED: Final = -32000
_MCP_REQUEST_TIMEOUT: Final = -32001
_JSONRPC_INVALID_REQUEST: Final = -32600
_JSONRPC_INTERNAL_ERROR: Final = -32603
# Errors mcp 2.3.0's streamable HTTP client and server make up themselves (no tool or
# server author chose them): the HTTP session is gone (server restarted, session expired),
# or the HTTP layer failed (a 4xx/5xx without a JSON-RPC body, e.g. a proxy's 503).
_MCP_SESSION_LOST: Final = frozenset({"Session not found", "Session terminated"})
_MCP_HTTP_FAILED: Final = "Server returned an error response"


def _mcp_error(exc: BaseException) -> Classification | None:
    """mcp 2.x ``MCPError``: client timeout (-32001), dead connection (-32000), the
    transport failures mcp reports as JSON-RPC errors (lost session, HTTP error status), or
    a protocol error from the server, which no retry or smarter model fixes."""
    code = getattr(exc, "code", None)
    message = getattr(exc, "message", None)
    made_up = getattr(getattr(exc, "error", None), "data", None) is None
    if code == _MCP_REQUEST_TIMEOUT:
        return Classification(ErrorCode.UPSTREAM_TIMEOUT, "timeout", True, exc)
    if code == _MCP_CONNECTION_CLOSED:
        return Classification(ErrorCode.UPSTREAM_UNAVAILABLE, "connection_closed", True, exc)
    if made_up and code == _JSONRPC_INVALID_REQUEST and message in _MCP_SESSION_LOST:
        return Classification(ErrorCode.UPSTREAM_UNAVAILABLE, "session_lost", True, exc)
    if made_up and code == _JSONRPC_INTERNAL_ERROR and message == _MCP_HTTP_FAILED:
        return Classification(ErrorCode.UPSTREAM_UNAVAILABLE, "http_error", True, exc)
    return Classification(ErrorCode.UPSTREAM_UNAVAILABLE, "mcp_error", False, exc)


def _carried(exc: BaseException) -> Classification | None:
    """The one rule for a ``LlamonError`` that carries its own answer (``carried``):
    ``LlamonApplicationError``, the MCP escalations; ``retryAfterMs`` from its extras."""
    if not isinstance(exc, LlamonError):
        return None
    try:
        own = exc.carried
    except Exception:  # a broken property must not turn a failure answer into a crash
        logger.warning("%s.carried failed; classifying by type", type(exc).__name__)
        return None
    if own is None:
        return None
    extras = exc.extras if isinstance(exc, LlamonApplicationError) else {}
    retry_after = extras.get("retry_after_ms")
    return Classification(
        own.code,
        snake_case(type(exc).__name__) if own.reason is None else own.reason,
        own.retriable,
        exc,
        retry_after_ms=retry_after if isinstance(retry_after, int) else None,
    )


@dataclass(frozen=True, slots=True)
class YieldingRule:
    """A generic wrapper's row: an explicit mapped cause decides, else ``rule`` applies.

    See the module docstring ("generic wrapper"). ``rule`` is what the wrapper means
    on its own (``ComponentInvokeError``: ``UPSTREAM_UNAVAILABLE``, retriable).
    """

    rule: ErrorRule | DynamicRule


def _fixed(rule: ErrorRule, message: str) -> DynamicRule:
    """A row whose client message is ``message``, whatever the exception's text."""

    def apply(exc: BaseException) -> Classification:
        reason = rule.reason or snake_case(type(exc).__name__)
        return Classification(rule.code, reason, rule.retriable, exc, message=message)

    return apply


_DATABASE_GONE_SQLSTATES: Final = ("08", "57P01", "57P02", "57P03", "53300")
"""SQLSTATEs of a database that does not answer: connection exceptions (class 08), admin
or crash shutdown, "cannot connect now" (starting up, shutting down), too many clients."""


def _sqlstate(exc: BaseException) -> str:
    """The SQLSTATE behind a SQLAlchemy ``DBAPIError`` (``pgcode`` of the driver's error,
    or ``sqlstate`` of asyncpg's exception it wraps); "" when there is none."""
    orig = getattr(exc, "orig", None)
    for source in (orig, getattr(orig, "__cause__", None)):
        for name in ("pgcode", "sqlstate"):
            value = getattr(source, name, None)
            if isinstance(value, str) and value:
                return value
    return ""


def _database_gone(exc: BaseException) -> Classification | None:
    """SQLAlchemy's ``DBAPIError`` when the database does not answer: a connection it
    dropped (server stopped or failed over mid-statement), or one it refused while
    starting up or shutting down. Text withheld (it names hosts); any other DBAPI error
    defers to the next base, then the fallback."""
    lost = getattr(exc, "connection_invalidated", False) is True
    if not (lost or _sqlstate(exc).startswith(_DATABASE_GONE_SQLSTATES)):
        return None
    return Classification(
        ErrorCode.UPSTREAM_UNAVAILABLE, "database_unavailable", True, exc, expose_text=False
    )


_UNAVAILABLE = ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, None, True)
_NETWORK = ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "network_error", True)
_TIMEOUT = ErrorRule(ErrorCode.UPSTREAM_TIMEOUT, "timeout", True)
_INTERNAL = ErrorRule(ErrorCode.INTERNAL_ERROR, None, False)
_DATABASE = ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "database_unavailable", True)

_RECURSION_MESSAGE: Final = (
    "The agent reached its limit of steps before finishing; retrying may succeed."
)

BUILTIN_RULES: Final[tuple[tuple[Key, Rule | YieldingRule, str], ...]] = (
    (GuardrailBlockedError, ErrorRule(ErrorCode.GUARDRAIL_BLOCKED), "artifacts withheld"),
    (MissingAPIKeyError, ErrorRule(ErrorCode.AUTH_REQUIRED), ""),
    (RegistryUnauthorizedError, ErrorRule(ErrorCode.AUTH_REQUIRED), ""),
    (ConfigValidationError, ErrorRule(ErrorCode.INVALID_INPUT), ""),
    (MissingFieldError, ErrorRule(ErrorCode.INVALID_INPUT), ""),
    (RegistryNotFoundError, ErrorRule(ErrorCode.NOT_FOUND), ""),
    (RegistryTimeoutError, ErrorRule(ErrorCode.UPSTREAM_TIMEOUT, None, True), ""),
    (TimeoutError, _TIMEOUT, "asyncio.TimeoutError is TimeoutError"),
    ("httpx.TimeoutException", _TIMEOUT, ""),
    ("httpx2.TimeoutException", _TIMEOUT, "mcp 2.x transport"),
    (ComponentInvokeError, YieldingRule(_UNAVAILABLE), "generic wrapper: a mapped cause decides"),
    (ComponentLoadError, YieldingRule(_UNAVAILABLE), "generic wrapper: a mapped cause decides"),
    ("httpx.ConnectError", _NETWORK, ""),
    ("httpx2.ConnectError", _NETWORK, "mcp 2.x transport"),
    ("httpx.TransportError", _NETWORK, "read/write/protocol errors"),
    ("httpx2.TransportError", _NETWORK, "mcp 2.x transport"),
    (ConnectionError, _NETWORK, "ECONNREFUSED, ECONNRESET, EPIPE"),
    ("httpx.HTTPStatusError", _http_status, "by status, see below"),
    ("httpx2.HTTPStatusError", _http_status, "by status, see below"),
    (
        "langgraph.GraphRecursionError",
        _fixed(
            ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "max_tool_iterations_exceeded", True),
            _RECURSION_MESSAGE,
        ),
        "recursion limit of a graph / ReAct loop; the SDK's message",
    ),
    ("langgraph.NodeTimeoutError", _TIMEOUT, "a flow node's timeout"),
    ("mcp.MCPError", _mcp_error, "by JSON-RPC code, see below"),
    ("openai.APIStatusError", _sdk_status, "openai SDK: by status, text withheld"),
    ("anthropic.APIStatusError", _sdk_status, "anthropic SDK: by status, text withheld"),
    ("openai.APITimeoutError", _hidden(_TIMEOUT), "openai SDK, text withheld"),
    ("anthropic.APITimeoutError", _hidden(_TIMEOUT), "anthropic SDK, text withheld"),
    ("openai.APIConnectionError", _hidden(_NETWORK), "openai SDK, text withheld"),
    ("anthropic.APIConnectionError", _hidden(_NETWORK), "anthropic SDK, text withheld"),
    ("sqlite3.OperationalError", _hidden(_DATABASE), "locked, disk I/O: text withheld (paths)"),
    (
        "a2a.A2AClientHTTPError",
        YieldingRule(_a2a_http_status),
        "a2a-sdk client: by status, see below; generic wrapper",
    ),
    ("a2a.A2AClientTimeoutError", _TIMEOUT, "a2a-sdk client"),
    ("a2a.A2AClientJSONRPCError", _a2a_jsonrpc, "a2a-sdk client: by JSON-RPC error, see below"),
    (
        "a2a.A2AClientJSONError",
        ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "a2a_invalid_response", False),
        "a2a-sdk client: the called agent's answer is not JSON-RPC",
    ),
    ("sqlalchemy.DBAPIError", _database_gone, "database gone, see below"),
    (MaxIterationError, _INTERNAL, ""),
    (MergeStrategyError, _INTERNAL, ""),
    (RoutingError, _INTERNAL, ""),
    (A2AProtocolError, _INTERNAL, ""),
    (LlamonError, _INTERNAL, "any other llamon exception; text shown"),
)
"""The built-in rows, in the order ``llamon errors`` prints them."""

_CARRIED_ROW: Final = RuleRow(
    "LlamonError carrying its own",
    "(its own)",
    "(its own)",
    "(its own)",
    "read first: LlamonApplicationError, MCP escalations; extras",
)

_DYNAMIC_ROWS: Final = (
    RuleRow("HTTPStatusError 429", "RATE_LIMITED", "rate_limited", "true", "retryAfterMs"),
    RuleRow("HTTPStatusError 401, 403", "AUTH_REQUIRED", "auth_failed", "false"),
    RuleRow("HTTPStatusError 404, 410", "NOT_FOUND", "http_not_found", "false"),
    RuleRow("HTTPStatusError 408", "UPSTREAM_TIMEOUT", "timeout", "true"),
    RuleRow("HTTPStatusError other 4xx", "UPSTREAM_UNAVAILABLE", "http_4xx", "false"),
    RuleRow("HTTPStatusError 5xx", "UPSTREAM_UNAVAILABLE", "http_5xx", "true"),
    RuleRow("MCPError -32001", "UPSTREAM_TIMEOUT", "timeout", "true", "client timeout"),
    RuleRow("MCPError -32000", "UPSTREAM_UNAVAILABLE", "connection_closed", "true"),
    RuleRow("MCPError session lost", "UPSTREAM_UNAVAILABLE", "session_lost", "true", "-32600"),
    RuleRow("MCPError HTTP status", "UPSTREAM_UNAVAILABLE", "http_error", "true", "-32603"),
    RuleRow("MCPError other", "UPSTREAM_UNAVAILABLE", "mcp_error", "false", "server refused"),
    RuleRow("A2AClientJSONRPCError + data", "(the called agent's)", "", "", "its errorCode"),
    RuleRow("A2AClientJSONRPCError -32001", "NOT_FOUND", "a2a_task_not_found", "false"),
    RuleRow("A2AClientJSONRPCError -32603", "UPSTREAM_UNAVAILABLE", "a2a_upstream_error", "true"),
    RuleRow("A2AClientJSONRPCError other", "UPSTREAM_UNAVAILABLE", "a2a_request_rejected", "false"),
    RuleRow("generic wrapper + cause", "(the cause's)", "", "", "raise ... from a mapped cause"),
    RuleRow(
        "DBAPIError database gone",
        "UPSTREAM_UNAVAILABLE",
        "database_unavailable",
        "true",
        "connection lost, SQLSTATE 08*, 57P01-03, 53300",
    ),
    RuleRow("ExceptionGroup", "(first mapped leaf)", "", "", "else the first leaf"),
    RuleRow("anything else", "INTERNAL_ERROR", "<snake_case type>", "false", "text withheld"),
)

_registry: dict[Key, Rule | YieldingRule] = {key: rule for key, rule, _ in BUILTIN_RULES}


def register_exception(
    exc_type: Key,
    code: ErrorCode | str | None = None,
    *,
    reason: str | None = None,
    retriable: bool = False,
    rule: DynamicRule | YieldingRule | None = None,
) -> None:
    """Map an exception type (or its dotted name ``"pkg.QualName"``) to an ``ErrorCode``.

    Give ``code`` (with optional ``reason``; None means snake_case of the raised type's
    name) or a ``rule`` function for mappings that depend on the exception's content.
    Registering a key again replaces its rule, built-in rows included; subclasses match
    through the MRO. A ``YieldingRule`` makes the type a generic wrapper (a mapped
    ``__cause__`` decides; see the module docstring).
    """
    if (code is None) == (rule is None):
        raise TypeError("register_exception needs exactly one of 'code' or 'rule'")
    if isinstance(exc_type, str) and exc_type.count(".") != 1:
        raise ValueError(f"dotted exception name must be 'package.QualName', got {exc_type!r}")
    if isinstance(exc_type, type) and not issubclass(exc_type, BaseException):
        raise TypeError(f"{exc_type!r} is not an exception type")
    if rule is not None:
        _registry[exc_type] = rule
    elif code is not None:
        _registry[exc_type] = ErrorRule(ErrorCode(code), reason, retriable)


def unregister_exception(exc_type: Key) -> None:
    """Remove a registered rule; a built-in row comes back as it shipped."""
    _registry.pop(exc_type, None)
    for key, builtin, _ in BUILTIN_RULES:
        if key == exc_type:
            _registry[key] = builtin


def _dotted(cls: type) -> str:
    return f"{cls.__module__.partition('.')[0]}.{cls.__qualname__}"


def _apply(rule: Rule, exc: BaseException) -> Classification | None:
    if isinstance(rule, ErrorRule):
        reason = rule.reason or snake_case(type(exc).__name__)
        return Classification(rule.code, reason, rule.retriable, exc)
    try:
        return rule(exc)
    except Exception:  # a broken rule must not turn a failure answer into a crash
        logger.warning(
            "exception rule %r failed on %s; trying the next base", rule, type(exc).__name__
        )
        return None


def _classify_single(exc: BaseException, *, follow_causes: bool = True) -> Classification | None:
    carried = _carried(exc)
    if carried is not None:
        return carried
    for cls in type(exc).__mro__:
        declared = cls.__dict__.get("__llamon_error__")
        candidates = (declared, _registry.get(cls), _registry.get(_dotted(cls)))
        for rule in candidates:
            if isinstance(rule, YieldingRule):
                if follow_causes:
                    specific = _specific_cause(exc)
                    if specific is not None:
                        return specific
                own = _apply(rule.rule, exc)
                if own is not None:
                    return dataclasses.replace(own, generic=True)
            elif isinstance(rule, ErrorRule) or callable(rule):
                result = _apply(rule, exc)
                if result is not None:
                    return result
    return None


_MAX_CHAIN: Final = 8


def _specific_cause(wrapper: BaseException) -> Classification | None:
    """The classification of the nearest explicit cause a row of its own maps, or None."""
    seen = {id(wrapper)}
    cause = wrapper.__cause__
    while cause is not None and id(cause) not in seen and len(seen) <= _MAX_CHAIN:
        seen.add(id(cause))
        if isinstance(cause, LlamonApplicationError | GuardrailBlockedError):
            return None  # it carries its own answer: the wrapper's row stands
        found = _classify_single(cause, follow_causes=False)
        if found is None:
            return None
        if not found.generic:
            return dataclasses.replace(found, exception=wrapper, cause=cause)
        cause = cause.__cause__
    return None


_RETRIED_ATTR: Final = "__llamon_retried__"


def mark_retried(exc: BaseException, retries: int) -> None:
    """Record on ``exc`` that the call it ended was retried ``retries`` times already.

    A retrying adapter calls this on the exception it finally raises; the client's
    ``retried`` and the record's evidence then say how often the server tried. Exceptions
    that refuse attributes are left as they are.
    """
    with contextlib.suppress(AttributeError, TypeError):
        setattr(exc, _RETRIED_ATTR, max(0, int(retries)))


def _retried(exc: BaseException) -> int:
    current: BaseException | None = exc
    for _ in range(_MAX_CHAIN):
        if current is None:
            break
        value = getattr(current, _RETRIED_ATTR, None)
        if isinstance(value, int):
            return value
        current = current.__cause__
    return 0


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for inner in group.exceptions:
        if isinstance(inner, BaseExceptionGroup):
            yield from _leaves(inner)
        else:
            yield inner


def classify_exception(exc: BaseException) -> Classification:
    """Classify ``exc``; never raises. See the module docstring for the resolution order."""
    found = _classify(exc)
    retried = _retried(exc)
    return dataclasses.replace(found, retried=retried) if retried else found


def _classify(exc: BaseException) -> Classification:
    if isinstance(exc, BaseExceptionGroup):
        leaves = list(_leaves(exc))
        for leaf in leaves:
            found = _classify_single(leaf)
            if found is not None:
                return found
        exc = leaves[0] if leaves else exc
    else:
        found = _classify_single(exc)
        if found is not None:
            return found
    return Classification(
        ErrorCode.INTERNAL_ERROR, snake_case(type(exc).__name__), False, exc, mapped=False
    )


def python_exc_to_error_code(exc: BaseException) -> tuple[ErrorCode, str, bool]:
    """``(errorCode, errorReason, retriable)`` for an exception (the table above)."""
    return classify_exception(exc).as_tuple()


def registered_rules() -> list[RuleRow]:
    """The table as printable rows: built-in rows, user rows, then content-dependent rows."""
    rows: list[RuleRow] = [_CARRIED_ROW]
    notes = {key: note for key, _, note in BUILTIN_RULES}
    for key, rule in _registry.items():
        name = key if isinstance(key, str) else _dotted(key)
        note = notes.get(key, "registered")
        if isinstance(rule, YieldingRule) and isinstance(rule.rule, ErrorRule):
            rule = rule.rule
        if isinstance(rule, ErrorRule):
            reason = rule.reason or "<snake_case type>"
            rows.append(RuleRow(name, rule.code.value, reason, str(rule.retriable).lower(), note))
        else:
            rows.append(RuleRow(name, "(by content)", "", "", note))
    rows.extend(_DYNAMIC_ROWS)
    return rows
