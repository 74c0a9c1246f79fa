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

A called agent's failure (a ``RemoteAgentError`` re-raised, a2a-sdk's client errors) is
then read one hop up by one rule (``one_hop_up``): codes that tell the caller the same
thing pass, the others become ``UPSTREAM_UNAVAILABLE``. ``classify_received`` skips that
step (what a retrier reads).

The retries already made for the failing call (a provider adapter's or the client's,
recorded with ``mark_retried``) travel with the classification as ``retried``, and the
error code of each attempt, in order, as ``attempt_codes``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
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
    RegistryUnavailableError,
    RoutingError,
)

__all__ = [
    "BUILTIN_RULES",
    "HOP_PASSED",
    "Classification",
    "ContentRule",
    "DynamicRule",
    "Rule",
    "RuleRow",
    "YieldingRule",
    "classify_exception",
    "classify_received",
    "mark_retried",
    "one_hop_up",
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
    the retries already made for the failing call and ``attempt_codes`` holds each
    attempt's error code, the last one included (empty when no retrier recorded them);
    ``hop_from`` is the called agent's own code when this answer reads a called agent's
    failure one hop up (``one_hop_up``), else None.
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
    attempt_codes: tuple[ErrorCode, ...] = ()
    hop_from: ErrorCode | None = None

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


def _row(key: str, rule: ErrorRule, note: str = "") -> RuleRow:
    """The printed row of ``rule`` for what ``key`` names."""
    reason = rule.reason or "<snake_case type>"
    return RuleRow(key, rule.code.value, reason, str(rule.retriable).lower(), note)


@dataclass(frozen=True, slots=True)
class ContentRule:
    """A rule that reads the exception, with the answers it can give, for the printed table.

    ``apply`` decides; ``outcome`` is its one answer when it has only one (a row whose text
    policy or message is special); ``rows`` are its content-dependent answers, built from
    the same data ``apply`` reads, and printed below the table.
    """

    apply: DynamicRule
    outcome: ErrorRule | None = None
    rows: tuple[RuleRow, ...] = ()

    def __call__(self, exc: BaseException) -> Classification | None:
        """Classify ``exc``; None defers to the next base."""
        return self.apply(exc)


def _retry_after(response: object) -> int | None:
    """``retry-after-ms`` (OpenAI, Anthropic) or ``Retry-After`` of a response, in ms."""
    return read_retry_after_ms(getattr(response, "headers", None))


def _hidden(rule: ErrorRule) -> ContentRule:
    """A fixed row whose exception text is withheld (it carries request data)."""

    def apply(exc: BaseException) -> Classification:
        reason = rule.reason or snake_case(type(exc).__name__)
        return Classification(rule.code, reason, rule.retriable, exc, expose_text=False)

    return ContentRule(apply, outcome=rule)


_BY_STATUS: Final[tuple[tuple[tuple[int, ...], ErrorRule], ...]] = (
    ((429,), ErrorRule(ErrorCode.RATE_LIMITED, "rate_limited", True)),
    ((401, 403), ErrorRule(ErrorCode.AUTH_REQUIRED, "auth_failed", False)),
    ((404, 410), ErrorRule(ErrorCode.NOT_FOUND, "http_not_found", False)),
    ((408,), ErrorRule(ErrorCode.UPSTREAM_TIMEOUT, "timeout", True)),
)
"""An upstream's HTTP status -> its row; statuses not listed fall to the two below."""
_STATUS_OTHER_4XX: Final = ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "http_4xx", False)
_STATUS_5XX: Final = ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "http_5xx", True)


def _status_rule(status: int) -> ErrorRule:
    for statuses, rule in _BY_STATUS:
        if status in statuses:
            return rule
    return _STATUS_5XX if status >= 500 else _STATUS_OTHER_4XX


def _by_status(status: int, response: object, exc: BaseException) -> Classification:
    """The row for an upstream's HTTP ``status`` (``response`` supplies ``Retry-After``
    for a rate limit)."""
    rule = _status_rule(status)
    limited = rule.code is ErrorCode.RATE_LIMITED
    return Classification(
        rule.code,
        rule.reason or "",
        rule.retriable,
        exc,
        retry_after_ms=_retry_after(response) if limited else None,
        http_status=status,
    )


_STATUS_ROWS: Final = (
    *(
        _row(
            f"HTTPStatusError {', '.join(map(str, statuses))}",
            rule,
            "retryAfterMs" if rule.code is ErrorCode.RATE_LIMITED else "",
        )
        for statuses, rule in _BY_STATUS
    ),
    _row("HTTPStatusError other 4xx", _STATUS_OTHER_4XX),
    _row("HTTPStatusError 5xx", _STATUS_5XX),
)


def _response_status(exc: BaseException) -> Classification | None:
    """httpx / httpx2 ``HTTPStatusError`` by status code."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if not isinstance(status, int):
        return None
    return _by_status(status, response, exc)


def _sdk_response_status(exc: BaseException) -> Classification | None:
    """A provider SDK's status error: by status, with its text withheld (it echoes keys)."""
    found = _response_status(exc)
    return None if found is None else dataclasses.replace(found, expose_text=False)


def _client_status(exc: BaseException) -> Classification | None:
    """a2a-sdk's ``A2AClientHTTPError`` by its ``status_code`` (a network failure is 503)."""
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or isinstance(status, bool):
        return None
    return _by_status(status, None, exc)


_http_status: Final = ContentRule(_response_status, rows=_STATUS_ROWS)
_sdk_status: Final = ContentRule(_sdk_response_status, rows=_STATUS_ROWS)
_a2a_http_status: Final = ContentRule(_client_status, rows=_STATUS_ROWS)


_REMOTE_REASON: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")
_A2A_TASK_NOT_FOUND: Final = ErrorRule(ErrorCode.NOT_FOUND, "a2a_task_not_found", False)
_A2A_UPSTREAM_ERROR: Final = ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "a2a_upstream_error", True)
_A2A_REJECTED: Final = ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "a2a_request_rejected", False)


def _a2a_code_rule(code: int) -> ErrorRule:
    """A called agent's bare JSON-RPC error code -> its row, read off the JSON-RPC table:
    task not found, an internal or unknown server error, or a refused request."""
    mapped = JSON_RPC_CODE_TO_ERROR_CODE.get(code)
    if mapped is ErrorCode.NOT_FOUND:
        return _A2A_TASK_NOT_FOUND
    if mapped is None or mapped is ErrorCode.INTERNAL_ERROR:
        return _A2A_UPSTREAM_ERROR
    return _A2A_REJECTED


def _a2a_remote(code: int, data: Mapping[str, object], exc: BaseException) -> Classification:
    """The called agent's error data in this SDK's shape, as received (its code, reason,
    retriable and ``retryAfterMs``); ``classify_exception`` then reads it one hop up."""
    remote_code = ErrorCode(str(data.get("errorCode")))
    retriable = data.get("retriable") is True
    message = f"The called agent answered JSON-RPC error {code} ({remote_code.value})."
    after = data.get("retryAfterMs")
    valid_after = isinstance(after, int) and not isinstance(after, bool) and after >= 0
    said = data.get("errorReason")
    valid_reason = isinstance(said, str) and _REMOTE_REASON.fullmatch(said) is not None
    return Classification(
        remote_code,
        str(said) if valid_reason else _A2A_UPSTREAM_ERROR.reason or "",
        retriable,
        exc,
        retry_after_ms=after if valid_after and isinstance(after, int) else None,
        message=message,
    )


def _a2a_answer(exc: BaseException) -> Classification | None:
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
        return _a2a_remote(code, data, exc)
    rule = _a2a_code_rule(code)
    message = f"The called agent answered JSON-RPC error {code}."
    return Classification(rule.code, rule.reason or "", rule.retriable, exc, message=message)


_A2A_LABELS: Final = {
    _A2A_TASK_NOT_FOUND: "task not found",
    _A2A_UPSTREAM_ERROR: "server error",
    _A2A_REJECTED: "refused request",
}


def _a2a_rows() -> tuple[RuleRow, ...]:
    key = "A2AClientJSONRPCError"
    by_rule: dict[ErrorRule, list[str]] = {rule: [] for rule in _A2A_LABELS}
    for number in JSON_RPC_CODE_TO_ERROR_CODE:
        by_rule[_a2a_code_rule(number)].append(str(number))
    by_rule[_A2A_UPSTREAM_ERROR].append("any unknown code")
    return (
        RuleRow(f"{key} + data", "(the called agent's)", "", "", "read one hop up, see below"),
        *(
            _row(f"{key} {_A2A_LABELS[rule]}", rule, ", ".join(numbers))
            for rule, numbers in by_rule.items()
        ),
    )


_a2a_jsonrpc: Final = ContentRule(_a2a_answer, rows=_a2a_rows())


# --- a called agent's failure, one hop up ---------------------------------------------------

HOP_PASSED: Final = frozenset(
    {
        ErrorCode.UPSTREAM_UNAVAILABLE,
        ErrorCode.UPSTREAM_TIMEOUT,
        ErrorCode.RATE_LIMITED,
        ErrorCode.NOT_FOUND,
        ErrorCode.GUARDRAIL_BLOCKED,
    }
)
"""A called agent's codes that tell our caller the same thing one hop up: something
behind us is down or slow, a quota to wait for (its ``retryAfterMs`` kept), a resource
that is not there, the caller's content blocked by a guardrail further down."""

_HOP_MAPPED: Final[Mapping[ErrorCode, ErrorRule]] = {
    ErrorCode.INVALID_INPUT: ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "a2a_request_rejected"),
    ErrorCode.AUTH_REQUIRED: ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "a2a_upstream_auth_failed"),
    ErrorCode.INTERNAL_ERROR: ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "a2a_upstream_error", True),
}
"""A called agent's codes that are *our* upstream failing, not the caller's doing: its
``INVALID_INPUT`` (the request we built was wrong), ``AUTH_REQUIRED`` (our credential for
it, not the caller's login), ``INTERNAL_ERROR`` (it broke). ``retriable`` is the called
agent's own where the rule says true (an ``INTERNAL_ERROR`` it calls retriable stays so),
else false."""


def _from_called_agent(exc: BaseException) -> bool:
    """An exception that reports a called agent's failure: one that carries its failure
    path (``cause_hops``: the client's ``RemoteAgentError`` family, or your own), or an
    a2a-sdk client error."""
    if hasattr(type(exc), "cause_hops"):
        return True
    return any(_dotted(cls) == "a2a.A2AClientError" for cls in type(exc).__mro__)


def one_hop_up(found: Classification) -> Classification:
    """What a llamon agent answers its caller when ``found`` is a called agent's failure.

    The one rule for a called agent's code, however it arrived (a ``RemoteAgentError`` the
    agent re-raised, a2a-sdk's client errors): a code in ``HOP_PASSED`` passes with the
    called agent's reason, ``retriable`` and ``retryAfterMs``; the others become
    ``UPSTREAM_UNAVAILABLE`` with their hop reason (``a2a_request_rejected``,
    ``a2a_upstream_auth_failed``, ``a2a_upstream_error``), ``retryAfterMs`` dropped, and
    ``hop_from`` keeps the called agent's code. Any other failure is returned as it is.
    The called agent's own codes stay in ``data.cause``, hop by hop.
    """
    if found.hop_from is not None or not _from_called_agent(found.exception):
        return found
    rule = _HOP_MAPPED.get(found.code)
    if rule is None:
        return dataclasses.replace(found, hop_from=found.code)
    return dataclasses.replace(
        found,
        code=rule.code,
        reason=rule.reason or "",
        retriable=rule.retriable and found.retriable,
        retry_after_ms=None,
        hop_from=found.code,
    )


_HOP_ROWS: Final = (
    RuleRow(
        "called agent " + ", ".join(code.value for code in ErrorCode if code in HOP_PASSED),
        "(its own)",
        "(its own)",
        "(its own)",
        "one hop up: passed, with retryAfterMs",
    ),
    *(
        RuleRow(
            f"called agent {code.value}",
            rule.code.value,
            rule.reason or "",
            "(its own)" if rule.retriable else "false",
            "one hop up: our upstream failing",
        )
        for code, rule in _HOP_MAPPED.items()
    ),
)
"""How a called agent's failure is answered one hop up (``one_hop_up``)."""


@dataclass(frozen=True, slots=True)
class _McpRow:
    """``MCPError`` with ``code`` (and, when ``messages`` is set, one of those texts on an
    error mcp made up itself, with no ``data``) -> ``rule``."""

    code: int
    rule: ErrorRule
    messages: tuple[str, ...] = ()
    note: str = ""

    def matches(self, code: object, message: object, made_up: bool) -> bool:
        if code != self.code:
            return False
        return not self.messages or (made_up and message in self.messages)


# Besides its two own codes, mcp 2.3.0's streamable HTTP client and server make up errors
# (no tool or server author chose them): the HTTP session is gone (server restarted,
# session expired), or the HTTP layer failed (a 4xx/5xx without a JSON-RPC body, e.g. a
# proxy's 503).
_MCP_ROWS: Final = (
    _McpRow(-32001, ErrorRule(ErrorCode.UPSTREAM_TIMEOUT, "timeout", True), note="client timeout"),
    _McpRow(-32000, ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "connection_closed", True)),
    _McpRow(
        -32600,
        ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "session_lost", True),
        ("Session not found", "Session terminated"),
        "made up by mcp",
    ),
    _McpRow(
        -32603,
        ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "http_error", True),
        ("Server returned an error response",),
        "made up by mcp",
    ),
)
_MCP_OTHER: Final = ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "mcp_error", False)


def _mcp_answer(exc: BaseException) -> Classification | None:
    """mcp 2.x ``MCPError``: client timeout (-32001), dead connection (-32000), the
    transport failures mcp reports as JSON-RPC errors (lost session, HTTP error status), or
    a protocol error from the server, which no retry or smarter model fixes."""
    code = getattr(exc, "code", None)
    message = getattr(exc, "message", None)
    made_up = getattr(getattr(exc, "error", None), "data", None) is None
    rule = next((row.rule for row in _MCP_ROWS if row.matches(code, message, made_up)), None)
    rule = rule or _MCP_OTHER
    return Classification(rule.code, rule.reason or "", rule.retriable, exc)


_mcp_error: Final = ContentRule(
    _mcp_answer,
    rows=(
        *(
            _row(
                f"MCPError {row.code}",
                row.rule,
                ": ".join(part for part in (row.note, " / ".join(row.messages)) if part),
            )
            for row in _MCP_ROWS
        ),
        _row("MCPError other", _MCP_OTHER, "the server refused"),
    ),
)


def _carried(exc: BaseException) -> Classification | None:
    """The one rule for a ``LlamonError`` that carries its own answer (``carried``):
    ``LlamonApplicationError``, the MCP escalations; ``retryAfterMs`` from its extras, the
    HTTP status from its ``http_status`` (a called agent's failure says it)."""
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
    status = getattr(exc, "http_status", None)
    return Classification(
        own.code,
        snake_case(type(exc).__name__) if own.reason is None else own.reason,
        own.retriable,
        exc,
        retry_after_ms=retry_after if isinstance(retry_after, int) else None,
        http_status=status if isinstance(status, int) and not isinstance(status, bool) else None,
    )


@dataclass(frozen=True, slots=True)
class YieldingRule:
    """A generic wrapper's row: an explicit mapped cause decides, else ``rule`` applies.

    See the module docstring ("generic wrapper"). ``rule`` is what the wrapper means
    on its own (``ComponentInvokeError``: ``UPSTREAM_UNAVAILABLE``, retriable).
    """

    rule: ErrorRule | DynamicRule


def _fixed(rule: ErrorRule, message: str) -> ContentRule:
    """A row whose client message is ``message``, whatever the exception's text."""

    def apply(exc: BaseException) -> Classification:
        reason = rule.reason or snake_case(type(exc).__name__)
        return Classification(rule.code, reason, rule.retriable, exc, message=message)

    return ContentRule(apply, outcome=rule)


_DATABASE_GONE_SQLSTATES: Final = (
    "08",
    "57P01",
    "57P02",
    "57P03",
    "53300",
    "40001",
    "40P01",
    "57014",
)
"""SQLSTATEs of a database that does not answer, or not now: connection exceptions (class
08), admin or crash shutdown, "cannot connect now" (starting up, shutting down), too many
clients, a serialization failure, a deadlock, a statement timeout. Sending again may work."""

_CONNECTION_CLOSED: Final = "connection is closed"
"""asyncpg's ``InterfaceError`` text for a call on a connection the server dropped."""


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


_DATABASE = ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "database_unavailable", True)


def _database_unavailable(exc: BaseException) -> Classification:
    reason = _DATABASE.reason or ""
    return Classification(_DATABASE.code, reason, _DATABASE.retriable, exc, expose_text=False)


def _gone(sqlstate: object) -> bool:
    return isinstance(sqlstate, str) and sqlstate.startswith(_DATABASE_GONE_SQLSTATES)


def _database_answer(exc: BaseException) -> Classification | None:
    """SQLAlchemy's ``DBAPIError`` when the database does not answer: a connection it
    dropped (server stopped or failed over mid-statement), or one it refused while
    starting up or shutting down. Text withheld (it names hosts); any other DBAPI error
    defers to the next base, then the fallback."""
    lost = getattr(exc, "connection_invalidated", False) is True
    return _database_unavailable(exc) if lost or _gone(_sqlstate(exc)) else None


def _asyncpg_answer(exc: BaseException) -> Classification | None:
    """asyncpg's ``PostgresError`` by its ``sqlstate`` (the same SQLSTATEs), text withheld;
    any other (a syntax error, a constraint) defers to the fallback."""
    return _database_unavailable(exc) if _gone(getattr(exc, "sqlstate", None)) else None


def _asyncpg_closed(exc: BaseException) -> Classification | None:
    """asyncpg's ``InterfaceError`` on a connection the server dropped, text withheld; any
    other (wrong arguments ...) defers to the fallback."""
    return _database_unavailable(exc) if _CONNECTION_CLOSED in str(exc) else None


def _sqlstates() -> str:
    return ", ".join(
        f"{state}*" if len(state) == 2 else state for state in _DATABASE_GONE_SQLSTATES
    )


_database_gone: Final = ContentRule(
    _database_answer,
    rows=(
        _row("DBAPIError database gone", _DATABASE, "connection lost, SQLSTATE " + _sqlstates()),
    ),
)
_asyncpg_gone: Final = ContentRule(
    _asyncpg_answer,
    rows=(_row("asyncpg PostgresError database gone", _DATABASE, "SQLSTATE " + _sqlstates()),),
)
_asyncpg_connection_closed: Final = ContentRule(
    _asyncpg_closed,
    rows=(_row("asyncpg InterfaceError connection closed", _DATABASE, _CONNECTION_CLOSED),),
)


_UNAVAILABLE = ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, None, True)
_NETWORK = ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, "network_error", True)
_TIMEOUT = ErrorRule(ErrorCode.UPSTREAM_TIMEOUT, "timeout", True)
_INTERNAL = ErrorRule(ErrorCode.INTERNAL_ERROR, None, False)
_FALLBACK: Final = ErrorRule(ErrorCode.INTERNAL_ERROR, None, False)
"""What an exception no rule maps becomes (``mapped=False``: its text stays inside)."""

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
    (RegistryUnavailableError, ErrorRule(ErrorCode.UPSTREAM_UNAVAILABLE, None, True), ""),
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
    ("asyncpg.PostgresError", _asyncpg_gone, "database gone, see below"),
    ("asyncpg.InterfaceError", _asyncpg_connection_closed, "connection closed, see below"),
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
_RESOLUTION_ROWS: Final = (
    RuleRow("generic wrapper + cause", "(the cause's)", "", "", "raise ... from a mapped cause"),
    RuleRow("ExceptionGroup", "(first mapped leaf)", "", "", "else the first leaf"),
    _row("anything else", _FALLBACK, "text withheld"),
)
"""How the rows are applied (not rows themselves): printed after the content rows."""

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


_DOTTED_MAX: Final = 4096
_dotted_names: dict[type, str] = {}


def _dotted(cls: type) -> str:
    """``cls``'s registry name: its top-level package, then its qualified name (worked
    out once per class)."""
    name = _dotted_names.get(cls)
    if name is None:
        name = f"{cls.__module__.partition('.')[0]}.{cls.__qualname__}"
        if len(_dotted_names) >= _DOTTED_MAX:
            _dotted_names.clear()
        _dotted_names[cls] = name
    return name


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
_ATTEMPT_CODES_ATTR: Final = "__llamon_attempt_codes__"


def mark_retried(
    exc: BaseException, retries: int, *, attempt_codes: Iterable[ErrorCode | str] = ()
) -> None:
    """Record on ``exc`` that the call it ended was retried ``retries`` times already.

    A retrier (a provider adapter, the client's ``call_with_retry``) calls this on the
    exception it finally raises, with the error code of every attempt in order; the
    client's ``retried`` and the record's evidence (``retried``, ``attempt_codes``) then
    say how often and why it tried. Codes that are no ``ErrorCode`` are left out;
    exceptions that refuse attributes are left as they are.
    """
    codes = tuple(ErrorCode(code) for code in attempt_codes if code in ErrorCode.__members__)
    with contextlib.suppress(AttributeError, TypeError):
        setattr(exc, _RETRIED_ATTR, max(0, int(retries)))
        setattr(exc, _ATTEMPT_CODES_ATTR, codes)


def _retried(exc: BaseException) -> tuple[int, tuple[ErrorCode, ...]]:
    """The retries and attempt codes marked on ``exc`` or the nearest explicit cause."""
    current: BaseException | None = exc
    for _ in range(_MAX_CHAIN):
        if current is None:
            break
        value = getattr(current, _RETRIED_ATTR, None)
        if isinstance(value, int):
            codes = getattr(current, _ATTEMPT_CODES_ATTR, ())
            return value, codes if isinstance(codes, tuple) else ()
        current = current.__cause__
    return 0, ()


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for inner in group.exceptions:
        if isinstance(inner, BaseExceptionGroup):
            yield from _leaves(inner)
        else:
            yield inner


def classify_exception(exc: BaseException) -> Classification:
    """Classify ``exc``; never raises. See the module docstring for the resolution order.

    This is what a llamon agent answers its caller: a called agent's failure is read one
    hop up (``one_hop_up``). A retrier deciding what to do with a called agent's answer
    reads it as received (``classify_received``).
    """
    return one_hop_up(classify_received(exc))


def classify_received(exc: BaseException) -> Classification:
    """Classify ``exc`` as the caller received it: a called agent's failure keeps the
    called agent's own code, reason, ``retriable`` and ``retryAfterMs`` (what the client's
    retry runner decides by). Everything else is classified as by ``classify_exception``."""
    found = _classify(exc)
    retried, codes = _retried(exc)
    if retried or codes:
        return dataclasses.replace(found, retried=retried, attempt_codes=codes)
    return found


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
    reason = _FALLBACK.reason or snake_case(type(exc).__name__)
    return Classification(_FALLBACK.code, reason, _FALLBACK.retriable, exc, mapped=False)


def python_exc_to_error_code(exc: BaseException) -> tuple[ErrorCode, str, bool]:
    """``(errorCode, errorReason, retriable)`` for an exception (the table above)."""
    return classify_exception(exc).as_tuple()


def registered_rules() -> list[RuleRow]:
    """The table as printable rows, generated from the rules themselves: the rule for what
    an exception carries, built-in and user rows, then the answers of content-dependent
    rules (by HTTP status, JSON-RPC code, SQLSTATE), then how the rows are applied."""
    rows: list[RuleRow] = [_CARRIED_ROW]
    content: dict[RuleRow, None] = {}
    notes = {key: note for key, _, note in BUILTIN_RULES}
    for key, rule in _registry.items():
        name = key if isinstance(key, str) else _dotted(key)
        note = notes.get(key, "registered")
        if isinstance(rule, YieldingRule):
            rule = rule.rule
        if isinstance(rule, ContentRule):
            content.update(dict.fromkeys(rule.rows))
            if rule.outcome is not None:
                rule = rule.outcome
        if isinstance(rule, ErrorRule):
            rows.append(_row(name, rule, note))
        else:
            rows.append(RuleRow(name, "(by content)", "", "", note))
    rows.extend(content)
    rows.extend(_HOP_ROWS)
    rows.extend(_RESOLUTION_ROWS)
    return rows
