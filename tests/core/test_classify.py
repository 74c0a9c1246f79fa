"""Every row of the mapping table, matched the way real code raises."""

from __future__ import annotations

import socket
import sqlite3
import tempfile
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import httpx2
import pytest
from langgraph.errors import GraphRecursionError, NodeTimeoutError
from mcp.shared.exceptions import MCPError

from llamon_agent.core.classify import (
    classify_exception,
    parse_retry_after_ms,
    python_exc_to_error_code,
    register_exception,
    registered_rules,
    unregister_exception,
)
from llamon_agent.core.codes import ErrorCode, ErrorRule
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

E = ErrorCode


def _status_error(
    module: type[httpx.HTTPStatusError] | type, status: int, **headers: str
) -> BaseException:
    lib = httpx if module is httpx.HTTPStatusError else httpx2
    request = lib.Request("GET", "https://api.example.test/v1/items")
    response = lib.Response(status, headers=headers, request=request)
    error = module(f"status {status}", request=request, response=response)
    assert isinstance(error, BaseException)
    return error


TABLE_ROWS = [
    (GuardrailBlockedError("blocked"), E.GUARDRAIL_BLOCKED, "guardrail_blocked_error", False),
    (MissingAPIKeyError("no key"), E.AUTH_REQUIRED, "missing_api_key_error", False),
    (RegistryUnauthorizedError("401"), E.AUTH_REQUIRED, "registry_unauthorized_error", False),
    (ConfigValidationError("bad"), E.INVALID_INPUT, "config_validation_error", False),
    (MissingFieldError("query"), E.INVALID_INPUT, "missing_field_error", False),
    (RegistryNotFoundError("gone"), E.NOT_FOUND, "registry_not_found_error", False),
    (RegistryTimeoutError("slow"), E.UPSTREAM_TIMEOUT, "registry_timeout_error", True),
    (TimeoutError("t"), E.UPSTREAM_TIMEOUT, "timeout", True),
    (TimeoutError(), E.UPSTREAM_TIMEOUT, "timeout", True),
    (httpx.ReadTimeout("t"), E.UPSTREAM_TIMEOUT, "timeout", True),
    (httpx.ConnectTimeout("t"), E.UPSTREAM_TIMEOUT, "timeout", True),
    (ComponentInvokeError("down"), E.UPSTREAM_UNAVAILABLE, "component_invoke_error", True),
    (ComponentLoadError("no"), E.UPSTREAM_UNAVAILABLE, "component_load_error", True),
    (httpx.ConnectError("refused"), E.UPSTREAM_UNAVAILABLE, "network_error", True),
    (GraphRecursionError("limit"), E.UPSTREAM_UNAVAILABLE, "max_tool_iterations_exceeded", True),
    (
        NodeTimeoutError("slow", 1.0, kind="run", run_timeout=1.0),
        E.UPSTREAM_TIMEOUT,
        "timeout",
        True,
    ),
    (MaxIterationError("x"), E.INTERNAL_ERROR, "max_iteration_error", False),
    (MergeStrategyError("x"), E.INTERNAL_ERROR, "merge_strategy_error", False),
    (RoutingError("x"), E.INTERNAL_ERROR, "routing_error", False),
    (A2AProtocolError("x"), E.INTERNAL_ERROR, "a2a_protocol_error", False),
    (ValueError("x"), E.INTERNAL_ERROR, "value_error", False),
    (KeyError("x"), E.INTERNAL_ERROR, "key_error", False),
]


@pytest.mark.reason(
    "guardrail_blocked_error",
    "missing_api_key_error",
    "registry_unauthorized_error",
    "config_validation_error",
    "missing_field_error",
    "registry_not_found_error",
    "registry_timeout_error",
    "timeout",
    "component_invoke_error",
    "component_load_error",
    "network_error",
    "max_tool_iterations_exceeded",
    "max_iteration_error",
    "merge_strategy_error",
    "routing_error",
    "a2a_protocol_error",
)
@pytest.mark.parametrize(
    ("exc", "code", "reason", "retriable"),
    TABLE_ROWS,
    ids=[type(row[0]).__name__ for row in TABLE_ROWS],
)
def test_table_row(exc: BaseException, code: ErrorCode, reason: str, retriable: bool) -> None:
    assert python_exc_to_error_code(exc) == (code, reason, retriable)


def test_only_the_fallback_is_unmapped() -> None:
    assert classify_exception(ValueError("x")).mapped is False
    assert classify_exception(ComponentInvokeError("x")).mapped is True
    assert classify_exception(A2AProtocolError("x")).mapped is True


def test_registry_timeout_is_also_a_builtin_timeout() -> None:
    with pytest.raises(TimeoutError):
        raise RegistryTimeoutError("slow")


def test_subclass_keeps_code_and_gets_its_own_reason() -> None:
    class BankLookupError(ComponentInvokeError):
        pass

    assert python_exc_to_error_code(BankLookupError("x")) == (
        E.UPSTREAM_UNAVAILABLE,
        "bank_lookup_error",
        True,
    )


@pytest.mark.reason(
    "rate_limited", "auth_failed", "http_not_found", "timeout", "http_4xx", "http_5xx"
)
@pytest.mark.parametrize("status_error", [httpx.HTTPStatusError, httpx2.HTTPStatusError])
@pytest.mark.parametrize(
    ("status", "code", "reason", "retriable"),
    [
        (429, E.RATE_LIMITED, "rate_limited", True),
        (401, E.AUTH_REQUIRED, "auth_failed", False),
        (403, E.AUTH_REQUIRED, "auth_failed", False),
        (404, E.NOT_FOUND, "http_not_found", False),
        (410, E.NOT_FOUND, "http_not_found", False),
        (408, E.UPSTREAM_TIMEOUT, "timeout", True),
        (400, E.UPSTREAM_UNAVAILABLE, "http_4xx", False),
        (422, E.UPSTREAM_UNAVAILABLE, "http_4xx", False),
        (500, E.UPSTREAM_UNAVAILABLE, "http_5xx", True),
        (502, E.UPSTREAM_UNAVAILABLE, "http_5xx", True),
        (503, E.UPSTREAM_UNAVAILABLE, "http_5xx", True),
    ],
)
def test_http_status_error_by_status(
    status_error: type, status: int, code: ErrorCode, reason: str, retriable: bool
) -> None:
    assert python_exc_to_error_code(_status_error(status_error, status)) == (
        code,
        reason,
        retriable,
    )


@pytest.mark.parametrize("status_error", [httpx.HTTPStatusError, httpx2.HTTPStatusError])
def test_429_takes_retry_after_seconds(status_error: type) -> None:
    found = classify_exception(_status_error(status_error, 429, **{"Retry-After": "30"}))
    assert found.retry_after_ms == 30_000


def test_429_takes_retry_after_http_date() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    found = classify_exception(_status_error(httpx.HTTPStatusError, 429, **{"Retry-After": when}))
    assert found.retry_after_ms is not None
    assert 100_000 <= found.retry_after_ms <= 121_000


def test_429_without_retry_after_has_none() -> None:
    assert classify_exception(_status_error(httpx.HTTPStatusError, 429)).retry_after_ms is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0),
        ("1.5", 1500),
        (" 7 ", 7000),
        ("-3", 0),
        ("soon", None),
        ("nan", None),
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, expected: int | None) -> None:
    assert parse_retry_after_ms(value) == expected


def test_retry_after_date_in_the_past_is_zero() -> None:
    now = datetime(2026, 11, 30, tzinfo=UTC)
    assert parse_retry_after_ms("Sun, 01 Nov 2026 00:00:00 GMT", now=now) == 0


@pytest.mark.reason(
    "network_error", "timeout", "connection_closed", "mcp_error", "session_lost", "http_error"
)
@pytest.mark.parametrize(
    ("exc", "code", "reason", "retriable"),
    [
        (httpx2.ConnectError("refused"), E.UPSTREAM_UNAVAILABLE, "network_error", True),
        (httpx2.ReadError("reset"), E.UPSTREAM_UNAVAILABLE, "network_error", True),
        (httpx2.ReadTimeout("slow"), E.UPSTREAM_TIMEOUT, "timeout", True),
        (httpx.ReadError("reset"), E.UPSTREAM_UNAVAILABLE, "network_error", True),
        (ConnectionRefusedError(111, "refused"), E.UPSTREAM_UNAVAILABLE, "network_error", True),
        (ConnectionResetError(104, "reset"), E.UPSTREAM_UNAVAILABLE, "network_error", True),
        (MCPError(-32001, "Request timed out"), E.UPSTREAM_TIMEOUT, "timeout", True),
        (MCPError(-32000, "Connection closed"), E.UPSTREAM_UNAVAILABLE, "connection_closed", True),
        (MCPError(-32602, "Invalid params"), E.UPSTREAM_UNAVAILABLE, "mcp_error", False),
        (MCPError(-32600, "Session not found"), E.UPSTREAM_UNAVAILABLE, "session_lost", True),
        (
            MCPError(-32603, "Server returned an error response"),
            E.UPSTREAM_UNAVAILABLE,
            "http_error",
            True,
        ),
        (MCPError(-32600, "Bad request"), E.UPSTREAM_UNAVAILABLE, "mcp_error", False),
    ],
    ids=[
        "httpx2-connect",
        "httpx2-read",
        "httpx2-timeout",
        "httpx-read",
        "econnrefused",
        "econnreset",
        "mcp-timeout",
        "mcp-closed",
        "mcp-other",
        "mcp-session-lost",
        "mcp-http-error",
        "mcp-invalid-request",
    ],
)
def test_transport_failures_mcp_really_raises(
    exc: BaseException, code: ErrorCode, reason: str, retriable: bool
) -> None:
    assert python_exc_to_error_code(exc) == (code, reason, retriable)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_real_refused_httpx2_connection() -> None:
    port = _closed_port()
    async with httpx2.AsyncClient() as client:
        with pytest.raises(httpx2.HTTPError) as caught:
            await client.get(f"http://127.0.0.1:{port}/mcp")
    assert python_exc_to_error_code(caught.value) == (
        E.UPSTREAM_UNAVAILABLE,
        "network_error",
        True,
    )


def test_exception_group_uses_first_mapped_leaf() -> None:
    group = ExceptionGroup(
        "task group",
        [ValueError("noise"), ExceptionGroup("inner", [httpx2.ConnectError("refused")])],
    )
    found = classify_exception(group)
    assert found.as_tuple() == (E.UPSTREAM_UNAVAILABLE, "network_error", True)
    assert isinstance(found.exception, httpx2.ConnectError)


def test_exception_group_without_mapped_leaf_falls_back_on_first_leaf() -> None:
    group = ExceptionGroup("g", [KeyError("k"), ValueError("v")])
    found = classify_exception(group)
    assert found.as_tuple() == (E.INTERNAL_ERROR, "key_error", False)
    assert found.mapped is False


def test_application_error_keeps_its_own_code() -> None:
    exc = LlamonApplicationError(E.RATE_LIMITED, "quota_hit", retriable=True, retryAfterMs=5)
    found = classify_exception(exc)
    assert found.as_tuple() == (E.RATE_LIMITED, "quota_hit", True)
    assert found.retry_after_ms == 5


def test_class_declared_mapping() -> None:
    class QuotaExceeded(LlamonError, code=E.RATE_LIMITED, reason="quota", retriable=True):
        pass

    class PlainDeclared(Exception):
        __llamon_error__ = ErrorRule(E.NOT_FOUND, "thing_missing")

    assert python_exc_to_error_code(QuotaExceeded()) == (E.RATE_LIMITED, "quota", True)
    assert python_exc_to_error_code(PlainDeclared()) == (E.NOT_FOUND, "thing_missing", False)


def test_class_declaration_needs_a_code() -> None:
    with pytest.raises(TypeError, match="need 'code'"):

        class Broken(LlamonError, reason="x"):
            pass


def test_register_by_type_and_by_dotted_name() -> None:
    class VendorError(Exception):
        pass

    VendorError.__module__ = "vendor_sdk.errors"
    VendorError.__qualname__ = "VendorError"
    try:
        register_exception("vendor_sdk.VendorError", E.UPSTREAM_UNAVAILABLE, retriable=True)
        assert python_exc_to_error_code(VendorError()) == (
            E.UPSTREAM_UNAVAILABLE,
            "vendor_error",
            True,
        )
        register_exception(VendorError, E.RATE_LIMITED, reason="vendor_quota", retriable=True)
        assert python_exc_to_error_code(VendorError()) == (E.RATE_LIMITED, "vendor_quota", True)
        assert any(row.key == "vendor_sdk.VendorError" for row in registered_rules())
    finally:
        unregister_exception("vendor_sdk.VendorError")
        unregister_exception(VendorError)
    assert python_exc_to_error_code(VendorError()) == (E.INTERNAL_ERROR, "vendor_error", False)


def test_register_a_dynamic_rule_that_can_defer() -> None:
    from llamon_agent.core.classify import Classification

    class Coded(Exception):
        def __init__(self, status: int) -> None:
            self.status = status

    def rule(exc: BaseException) -> Classification | None:
        if getattr(exc, "status", 0) == 7:
            return Classification(E.NOT_FOUND, "seven", False, exc)
        return None

    register_exception(Coded, rule=rule)
    try:
        assert python_exc_to_error_code(Coded(7)) == (E.NOT_FOUND, "seven", False)
        assert python_exc_to_error_code(Coded(8)) == (E.INTERNAL_ERROR, "coded", False)
    finally:
        unregister_exception(Coded)


def test_overriding_a_builtin_row_and_restoring_it() -> None:
    register_exception(TimeoutError, E.UPSTREAM_UNAVAILABLE, reason="slow")
    try:
        assert python_exc_to_error_code(TimeoutError()) == (E.UPSTREAM_UNAVAILABLE, "slow", False)
    finally:
        unregister_exception(TimeoutError)
    assert python_exc_to_error_code(TimeoutError()) == (E.UPSTREAM_TIMEOUT, "timeout", True)


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        ((ValueError,), {}, TypeError),
        ((ValueError, E.NOT_FOUND), {"rule": lambda e: None}, TypeError),
        (("no_dot_name", E.NOT_FOUND), {}, ValueError),
        ((int, E.NOT_FOUND), {}, TypeError),
        ((ValueError, "NOT_A_CODE"), {}, ValueError),
    ],
)
def test_register_rejects_bad_input(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        register_exception(*args, **kwargs)


def test_classification_never_raises_on_broken_exceptions() -> None:
    class Weird(Exception):
        @property
        def response(self) -> object:
            raise RuntimeError("boom")

    Weird.__module__ = "httpx._exceptions"
    Weird.__qualname__ = "HTTPStatusError"
    found = classify_exception(Weird())
    assert found.code is E.INTERNAL_ERROR


def _sdk_error(module: str, status: int, **headers: str) -> BaseException:
    import importlib

    sdk = importlib.import_module(module)
    request = httpx2.Request("POST", "https://api.example.test/v1/chat")
    response = httpx2.Response(status, headers=headers, request=request)
    error_type = {429: "RateLimitError", 401: "AuthenticationError", 500: "InternalServerError"}
    cls = getattr(sdk, error_type[status])
    error = cls(
        "Incorrect API key provided: sk-abcdefghijklmnopqrstuvwx", response=response, body=None
    )
    assert isinstance(error, BaseException)
    return error


@pytest.mark.parametrize("module", ["openai", "anthropic"])
def test_provider_sdk_errors_map_by_status_with_text_withheld(module: str) -> None:
    from llamon_agent.core.errors import error_data_for_exception

    limited = _sdk_error(module, 429, **{"retry-after-ms": "1500"})
    found = classify_exception(limited)
    assert (found.code, found.reason, found.retriable, found.retry_after_ms) == (
        E.RATE_LIMITED,
        "rate_limited",
        True,
        1500,
    )
    assert found.expose_text is False
    data = error_data_for_exception(limited)
    assert "sk-abcdefghijkl" not in data.error_message
    assert data.error_message == "Too many requests; try again later."
    assert python_exc_to_error_code(_sdk_error(module, 401))[0] is E.AUTH_REQUIRED
    assert python_exc_to_error_code(_sdk_error(module, 500))[:2] == (
        E.UPSTREAM_UNAVAILABLE,
        "http_5xx",
    )


def _locked_sqlite_error() -> sqlite3.OperationalError:
    """A real "database is locked": a second writer with no busy timeout."""
    with tempfile.TemporaryDirectory() as directory:
        path = f"{directory}/locked.db"
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("CREATE TABLE t (x)")
        holder.execute("BEGIN IMMEDIATE")
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            return exc
        finally:
            other.close()
            holder.close()
    raise AssertionError("the second writer was not refused")


@pytest.mark.reason("database_unavailable")
def test_a_locked_sqlite_database_is_a_retriable_database_failure_with_text_withheld() -> None:
    found = classify_exception(_locked_sqlite_error())
    assert found.as_tuple() == (ErrorCode.UPSTREAM_UNAVAILABLE, "database_unavailable", True)
    assert found.expose_text is False


@pytest.mark.reason("database_unavailable")
def test_a_database_that_does_not_answer_is_database_unavailable() -> None:
    from asyncpg.exceptions import (
        CannotConnectNowError,
        UniqueViolationError,
    )
    from sqlalchemy.exc import DBAPIError

    host = "db.internal.example:5432"
    lost = DBAPIError("SELECT 1", None, OSError(f"connection to {host} closed"))
    lost.connection_invalidated = True  # PostgreSQL stopped mid-statement
    starting = DBAPIError("SELECT 1", None, CannotConnectNowError("the database is starting up"))
    for exc in (lost, starting):
        found = classify_exception(exc)
        assert found.as_tuple() == (ErrorCode.UPSTREAM_UNAVAILABLE, "database_unavailable", True)
        assert found.expose_text is False
    duplicate = DBAPIError("INSERT", None, UniqueViolationError("duplicate key"))
    assert classify_exception(duplicate).as_tuple() == (
        ErrorCode.INTERNAL_ERROR,
        "dbapi_error",
        False,
    )
