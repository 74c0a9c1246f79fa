"""What a failure says must be right and safe: a wrapper classified by its cause, a2a-sdk's
client errors as rows of the table, the SDK's own message for a recursion limit, the
retries already made, and no upstream location in any client-visible message."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from a2a.client.errors import (
    A2AClientHTTPError,
    A2AClientJSONError,
    A2AClientJSONRPCError,
    A2AClientTimeoutError,
)
from a2a.types import InternalError, InvalidParamsError, JSONRPCErrorResponse, TaskNotFoundError
from langgraph.errors import GraphRecursionError

from llamon_agent.core.classify import classify_exception, classify_received, mark_retried
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import error_data_for_exception
from llamon_agent.core.failures import FailureRecord
from llamon_agent.exceptions import (
    ComponentInvokeError,
    ComponentLoadError,
    GuardrailBlockedError,
)

E = ErrorCode
BANK_URL = "https://bank-gw.internal.example:8443/v1/accounts/check?branch=7"


def _status_error(status: int, **headers: str) -> httpx.HTTPStatusError:
    """What ``response.raise_for_status()`` raises, text and all."""
    request = httpx.Request("POST", BANK_URL)
    response = httpx.Response(status, headers=headers, request=request)
    try:
        response.raise_for_status()
    except httpx.HTTPStatusError as exc:
        return exc
    raise AssertionError("not an error status")


def _bank_lookup_failure(cause: BaseException) -> ComponentInvokeError:
    """The documented wrapping idiom, raised for real."""
    try:
        try:
            raise cause
        except httpx.HTTPStatusError as e:
            raise ComponentInvokeError(f"bank lookup failed: {e}") from e
        except httpx.ConnectError as e:
            raise ComponentInvokeError(f"bank lookup failed: {e}") from e
    except ComponentInvokeError as wrapped:
        return wrapped
    raise AssertionError("not raised")


# --- a generic wrapper yields to its mapped cause ----------------------------------------


@pytest.mark.parametrize(
    ("status", "headers", "code", "reason", "retriable", "retry_after_ms"),
    [
        (429, {"Retry-After": "7"}, E.RATE_LIMITED, "rate_limited", True, 7000),
        (401, {}, E.AUTH_REQUIRED, "auth_failed", False, None),
        (403, {}, E.AUTH_REQUIRED, "auth_failed", False, None),
        (503, {}, E.UPSTREAM_UNAVAILABLE, "http_5xx", True, None),
        (400, {}, E.UPSTREAM_UNAVAILABLE, "http_4xx", False, None),
    ],
)
def test_a_wrapped_http_status_error_maps_by_the_causes_status(
    status: int,
    headers: dict[str, str],
    code: ErrorCode,
    reason: str,
    retriable: bool,
    retry_after_ms: int | None,
) -> None:
    wrapped = _bank_lookup_failure(_status_error(status, **headers))
    data = error_data_for_exception(wrapped).to_wire()
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (code, reason, retriable)
    assert data.get("retryAfterMs") == retry_after_ms
    assert data["errorMessage"].startswith("bank lookup failed: ")
    record = FailureRecord.from_exception(wrapped)
    assert (record.reason, record.error_code, record.retryable) == (reason, code, retriable)
    assert record.evidence["http_status"] == status
    assert record.evidence["cause_type"] == "HTTPStatusError"


def test_a_wrapped_connect_error_is_a_network_error() -> None:
    wrapped = _bank_lookup_failure(httpx.ConnectError("All connection attempts failed"))
    found = classify_exception(wrapped)
    assert (found.code, found.reason, found.retriable) == (
        E.UPSTREAM_UNAVAILABLE,
        "network_error",
        True,
    )
    assert found.exception is wrapped


def test_a_wrapper_without_a_mapped_cause_keeps_its_own_row() -> None:
    assert classify_exception(ComponentInvokeError("down")).as_tuple() == (
        E.UPSTREAM_UNAVAILABLE,
        "component_invoke_error",
        True,
    )
    with pytest.raises(ComponentInvokeError) as raised:
        raise ComponentInvokeError("down") from KeyError("x")  # an unmapped cause
    assert classify_exception(raised.value).reason == "component_invoke_error"


def _suppressed_cause() -> None:
    try:
        raise _status_error(429)
    except httpx.HTTPStatusError:
        raise ComponentInvokeError("bank lookup failed") from None


def _implicit_context() -> None:
    try:
        raise _status_error(429)
    except httpx.HTTPStatusError:
        raise ComponentInvokeError("bank lookup failed")  # noqa: B904 -- on purpose


@pytest.mark.parametrize("raiser", [_suppressed_cause, _implicit_context])
def test_only_an_explicit_cause_counts_not_the_implicit_context(
    raiser: Callable[[], None],
) -> None:
    with pytest.raises(ComponentInvokeError) as raised:
        raiser()
    assert raised.value.__context__ is not None
    assert classify_exception(raised.value).reason == "component_invoke_error"


def test_other_generic_wrappers_in_the_chain_are_looked_through() -> None:
    inner = ComponentLoadError("could not load")
    inner.__cause__ = TimeoutError()
    outer = ComponentInvokeError("bank lookup failed")
    outer.__cause__ = inner
    assert classify_exception(outer).as_tuple() == (E.UPSTREAM_TIMEOUT, "timeout", True)


def test_a_cause_with_its_own_answer_is_not_looked_through() -> None:
    outer = ComponentInvokeError("bank lookup failed")
    outer.__cause__ = GuardrailBlockedError("blocked")
    assert classify_exception(outer).code is E.UPSTREAM_UNAVAILABLE


def test_a_cause_chain_that_loops_ends() -> None:
    first, second = ComponentInvokeError("a"), ComponentLoadError("b")
    first.__cause__, second.__cause__ = second, first
    assert classify_exception(first).reason == "component_invoke_error"


# --- a2a-sdk's client errors --------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "reason", "retriable"),
    [
        (503, E.UPSTREAM_UNAVAILABLE, "http_5xx", True),
        (429, E.RATE_LIMITED, "rate_limited", True),
        (401, E.UPSTREAM_UNAVAILABLE, "a2a_upstream_auth_failed", False),
        (404, E.NOT_FOUND, "http_not_found", False),
        (400, E.UPSTREAM_UNAVAILABLE, "http_4xx", False),
    ],
)
@pytest.mark.reason("a2a_upstream_auth_failed")
def test_a2a_client_http_errors_by_status(
    status: int, code: ErrorCode, reason: str, retriable: bool
) -> None:
    found = classify_exception(A2AClientHTTPError(status, "refused"))
    assert (found.code, found.reason, found.retriable, found.http_status) == (
        code,
        reason,
        retriable,
        status,
    )


def test_a2a_client_401_as_received_is_auth_required_for_the_retrier() -> None:
    found = classify_received(A2AClientHTTPError(401, "refused"))
    assert (found.code, found.reason, found.http_status) == (E.AUTH_REQUIRED, "auth_failed", 401)
    assert found.hop_from is None


def test_a2a_client_http_429_takes_retry_after_from_the_response() -> None:
    try:
        try:
            raise _status_error(429, **{"Retry-After": "3"})
        except httpx.HTTPStatusError as e:
            raise A2AClientHTTPError(e.response.status_code, str(e)) from e
    except A2AClientHTTPError as exc:
        found = classify_exception(exc)
    assert (found.code, found.retriable, found.retry_after_ms) == (E.RATE_LIMITED, True, 3000)


def test_a2a_client_network_failure_is_a_network_error() -> None:
    exc = A2AClientHTTPError(503, "Network communication error: connection refused")
    exc.__cause__ = httpx.ConnectError("connection refused")
    assert classify_exception(exc).as_tuple() == (E.UPSTREAM_UNAVAILABLE, "network_error", True)


@pytest.mark.reason("timeout", "a2a_invalid_response")
def test_a2a_client_timeout_and_bad_json() -> None:
    assert classify_exception(A2AClientTimeoutError("Client Request timed out")).as_tuple() == (
        E.UPSTREAM_TIMEOUT,
        "timeout",
        True,
    )
    assert classify_exception(A2AClientJSONError("Expecting value")).as_tuple() == (
        E.UPSTREAM_UNAVAILABLE,
        "a2a_invalid_response",
        False,
    )


def _jsonrpc(error: Any) -> A2AClientJSONRPCError:
    return A2AClientJSONRPCError(JSONRPCErrorResponse(id=1, error=error))


@pytest.mark.reason("a2a_upstream_error", "a2a_task_not_found", "a2a_request_rejected")
@pytest.mark.parametrize(
    ("error", "code", "reason", "retriable"),
    [
        (InternalError(), E.UPSTREAM_UNAVAILABLE, "a2a_upstream_error", True),
        (TaskNotFoundError(), E.NOT_FOUND, "a2a_task_not_found", False),
        (InvalidParamsError(), E.UPSTREAM_UNAVAILABLE, "a2a_request_rejected", False),
    ],
)
def test_a2a_client_jsonrpc_errors_by_code(
    error: InternalError | TaskNotFoundError | InvalidParamsError,
    code: ErrorCode,
    reason: str,
    retriable: bool,
) -> None:
    exc = _jsonrpc(error)
    found = classify_exception(exc)
    assert (found.code, found.reason, found.retriable) == (code, reason, retriable)
    data = error_data_for_exception(exc).to_wire()
    expected_code = error.code
    assert data["errorMessage"] == f"The called agent answered JSON-RPC error {expected_code}."


def test_a2a_client_jsonrpc_error_data_of_a_called_agent_is_honoured() -> None:
    remote = InternalError(
        data={
            "errorCode": "RATE_LIMITED",
            "errorReason": "quota_exceeded",
            "retriable": True,
            "retryAfterMs": 1500,
        }
    )
    found = classify_exception(_jsonrpc(remote))
    assert (found.code, found.reason, found.retriable, found.retry_after_ms) == (
        E.RATE_LIMITED,
        "quota_exceeded",
        True,
        1500,
    )
    refused = InvalidParamsError(data={"errorCode": "INVALID_INPUT", "errorReason": "bad"})
    assert classify_exception(_jsonrpc(refused)).as_tuple() == (
        E.UPSTREAM_UNAVAILABLE,
        "a2a_request_rejected",
        False,
    )


# --- the recursion limit: the SDK's own message -------------------------------------------


def test_a_recursion_limit_shows_the_sdks_message_not_langgraphs_hint() -> None:
    exc = GraphRecursionError(
        "Recursion limit of 25 reached without hitting a stop condition. You can increase the "
        "limit by setting the `recursion_limit` config key.\nFor troubleshooting, visit: "
        "https://docs.langchain.com/oss/python/langgraph/errors/GRAPH_RECURSION_LIMIT"
    )
    data = error_data_for_exception(exc).to_wire()
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "UPSTREAM_UNAVAILABLE",
        "max_tool_iterations_exceeded",
        True,
    )
    assert data["errorMessage"] == (
        "The agent reached its limit of steps before finishing; retrying may succeed."
    )
    assert FailureRecord.from_exception(exc).message == data["errorMessage"]


# --- retries already made -----------------------------------------------------------------


def test_retries_marked_on_the_raised_exception_reach_data_and_record() -> None:
    exc = _status_error(503)
    mark_retried(exc, 2)
    assert classify_exception(exc).retried == 2
    assert error_data_for_exception(exc).to_wire()["retried"] == 2
    assert FailureRecord.from_exception(exc).evidence["retried"] == 2
    wrapped = ComponentInvokeError("model failed")
    wrapped.__cause__ = exc
    assert error_data_for_exception(wrapped).to_wire()["retried"] == 2
    assert error_data_for_exception(_status_error(503)).to_wire()["retried"] == 0


# --- no upstream location in a client-visible message -------------------------------------


def test_no_url_or_host_in_the_message_nor_in_a_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wrapped = _bank_lookup_failure(_status_error(503))
    with caplog.at_level(logging.DEBUG):
        data = error_data_for_exception(wrapped).to_wire()
        record = FailureRecord.from_exception(wrapped)
    logged = [r.getMessage() for r in caplog.records]
    for text in (data["errorMessage"], record.message, *logged):
        assert "bank-gw" not in text
        assert "internal.example" not in text
        assert "/v1/accounts" not in text
        assert "://" not in text
    for text in (data["errorMessage"], record.message):
        assert text.startswith("bank lookup failed: Server error '503 Service Unavailable'")


def test_a_connect_error_naming_a_host_and_port_shows_neither() -> None:
    exc = ConnectionRefusedError("Cannot connect to host db-primary.corp.local:5432 (10.2.3.4)")
    text = error_data_for_exception(exc).to_wire()["errorMessage"]
    assert text == "Cannot connect to host [REDACTED:host] ([REDACTED:host])"


def test_an_application_error_message_loses_urls_too() -> None:
    exc = ComponentInvokeError("see http://10.0.0.7:9000/admin for details")
    assert error_data_for_exception(exc).to_wire()["errorMessage"] == (
        "see [REDACTED:url] for details"
    )
