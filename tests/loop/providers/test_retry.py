"""The shared retry / conversion module, without a server."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.loop.providers._retry import (
    RetryPolicy,
    SDKErrorTypes,
    call_with_retries,
    convert_sdk_error,
    retry_after_seconds,
    safe_url,
)
from tests.loop.providers.fakes import SECRET, FakeSleep

OPENAI = SDKErrorTypes(
    "OpenAI", openai.APIStatusError, openai.APITimeoutError, openai.APIConnectionError
)
ANTHROPIC = SDKErrorTypes(
    "Anthropic", anthropic.APIStatusError, anthropic.APITimeoutError, anthropic.APIConnectionError
)
URL = f"https://user:{SECRET}@api.example.com:8443/v1/chat/completions?api-key={SECRET}#frag"


def _request() -> httpx2.Request:
    return httpx2.Request(
        "POST", URL, headers={"Authorization": f"Bearer {SECRET}"}, content=b'{"prompt": "x"}'
    )


def test_safe_url_drops_userinfo_query_and_fragment() -> None:
    assert safe_url(URL) == "https://api.example.com:8443/v1/chat/completions"
    assert safe_url("http://[::1]:9/v1") == "http://[::1]:9/v1"
    assert safe_url("http://exa mple.com:x") == "<invalid url>"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after-ms": "junk", "retry-after": "3"}, 3.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_seconds(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(httpx.Headers(headers)) == expected


@pytest.mark.parametrize("errors", [OPENAI, ANTHROPIC], ids=["openai", "anthropic"])
def test_status_error_becomes_a_clean_httpx_error(errors: SDKErrorTypes) -> None:
    response = httpx2.Response(
        429,
        headers={"retry-after": "7", "x-request-id": "req_123", "set-cookie": SECRET},
        json={"error": {"message": f"bad key {SECRET}", "type": "rate_limit_error"}},
        request=_request(),
    )
    status_cls: Any = errors.status
    sdk_error = status_cls(f"Error code: 429 - {SECRET}", response=response, body=None)
    converted = convert_sdk_error(sdk_error, errors)
    assert isinstance(converted, httpx.HTTPStatusError)
    assert str(converted).startswith(f"{errors.provider} API answered HTTP 429 Too Many Requests")
    assert "POST https://api.example.com:8443/v1/chat/completions" in str(converted)
    assert "request id req_123" in str(converted)
    assert SECRET not in str(converted)
    assert dict(converted.response.headers) == {"retry-after": "7", "x-request-id": "req_123"}
    assert converted.request.headers.get("authorization") is None
    assert converted.response.content == b""
    found = classify_exception(converted)
    assert (found.code, found.retry_after_ms) == (ErrorCode.RATE_LIMITED, 7000)


def test_timeout_and_connect_errors_keep_their_httpx_kind() -> None:
    request = _request()
    try:
        raise openai.APITimeoutError(request) from httpx2.ConnectTimeout("slow", request=request)
    except openai.APITimeoutError as err:
        timeout = convert_sdk_error(err, OPENAI, timeout=1.5)
    assert isinstance(timeout, httpx.ConnectTimeout)
    assert "within 1.5 s" in str(timeout)

    try:
        raise anthropic.APIConnectionError(request=request) from httpx2.RemoteProtocolError(
            "peer closed", request=request
        )
    except anthropic.APIConnectionError as err:
        broken = convert_sdk_error(err, ANTHROPIC)
    assert isinstance(broken, httpx.RemoteProtocolError)
    assert classify_exception(broken).as_tuple() == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "network_error",
        True,
    )
    assert SECRET not in str(broken)

    unknown = convert_sdk_error(anthropic.APIConnectionError(request=request), ANTHROPIC)
    assert isinstance(unknown, httpx.ConnectError)


def test_other_exceptions_are_not_converted() -> None:
    assert convert_sdk_error(ValueError("x"), OPENAI) is None
    assert convert_sdk_error(openai.OpenAIError("x"), OPENAI) is None


def test_policy_validates_max_retries() -> None:
    with pytest.raises(TypeError):
        RetryPolicy(True)
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(-1)


async def test_a_failure_outside_the_table_is_raised_as_is_without_retry() -> None:
    sleeper = FakeSleep()
    calls = 0

    async def broken() -> None:
        nonlocal calls
        calls += 1
        raise KeyError("bug")

    with pytest.raises(KeyError):
        await call_with_retries(
            broken,
            policy=RetryPolicy(3, sleeper),
            errors=OPENAI,
            attempt_timeout=None,
            operation="test",
        )
    assert (calls, sleeper.waits) == (1, [])


async def test_retries_are_counted() -> None:
    sleeper = FakeSleep()
    request = _request()
    outcomes: list[BaseException | str] = [
        openai.APIConnectionError(request=request),
        openai.APITimeoutError(request),
        "ok",
    ]

    async def flaky() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    result = await call_with_retries(
        flaky, policy=RetryPolicy(2, sleeper), errors=OPENAI, attempt_timeout=1.0, operation="t"
    )
    assert result == ("ok", 2)
    assert len(sleeper.waits) == 2
