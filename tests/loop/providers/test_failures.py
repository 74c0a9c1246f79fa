"""Retries and failure mapping, the same for both adapters, against a real loopback server."""

from __future__ import annotations

import asyncio
import logging
import socket
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import error_data_for_exception
from llamon_agent.exceptions import ComponentInvokeError, MissingAPIKeyError
from llamon_agent.loop import ToolRegistry, run_loop
from llamon_agent.loop.model import ToolSpec, UserMessage
from tests.loop.providers.fakes import SECRET, FakeProvider, FakeSleep, Reply, Wire

PROMPT = "my private prompt text 4711"
MESSAGES = [UserMessage(PROMPT)]
TOOLS = [ToolSpec("lookup", "Look a thing up.", {"type": "object", "properties": {}})]


def assert_safe(exc: BaseException, caplog: pytest.LogCaptureFixture) -> None:
    """No key in the exception or any log line; no request body in the exception or our logs.

    (The SDKs' own DEBUG logs show request bodies -- never keys; see docs/models.md.)
    """
    ours = "\n".join(
        record.getMessage() for record in caplog.records if record.name.startswith("llamon_agent")
    )
    for text in (str(exc), repr(exc), caplog.text):
        assert SECRET not in text
    for text in (str(exc), repr(exc), ours):
        assert PROMPT not in text
    if isinstance(exc, httpx.HTTPStatusError | httpx.RequestError):
        headers = exc.request.headers
        assert "authorization" not in headers
        assert "x-api-key" not in headers
        assert exc.request.content == b""
    if isinstance(exc, httpx.HTTPStatusError):
        assert exc.response.content == b""


@pytest.fixture(autouse=True)
def _debug_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)


async def test_success_sends_the_key_and_reports_no_retries(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep
) -> None:
    fake.script(wire.answer("hello"))
    async with wire.make(fake.url, sleep=sleeper) as model:
        response = await model.complete(MESSAGES, TOOLS)
    assert response.content == "hello"
    assert response.tool_calls == ()
    assert response.retries == 0
    assert response.usage == {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}
    assert [seen.path for seen in fake.requests] == [wire.path]
    assert wire.key_header(fake.requests[0]) == SECRET
    assert sleeper.waits == []


async def test_empty_response(wire: Wire, fake: FakeProvider, sleeper: FakeSleep) -> None:
    fake.script(wire.answer(None))
    async with wire.make(fake.url, sleep=sleeper) as model:
        response = await model.complete(MESSAGES, TOOLS)
    assert response.content is None
    assert response.tool_calls == ()
    assert response.retries == 0


async def test_429_with_retry_after_then_success(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep, caplog: pytest.LogCaptureFixture
) -> None:
    fake.script(wire.error(429, "slow down", {"Retry-After": "2"}), wire.answer("ok"))
    async with wire.make(fake.url, sleep=sleeper) as model:
        response = await model.complete(MESSAGES, TOOLS)
    assert response.content == "ok"
    assert response.retries == 1
    assert sleeper.waits == [pytest.approx(2.0)]
    assert len(fake.requests) == 2
    assert "retry 1 of 2 in 2.00 s" in caplog.text
    assert "rate_limited HTTP 429" in caplog.text
    assert SECRET not in caplog.text


@pytest.mark.reason("rate_limited")
async def test_429_forever_raises_rate_limited_with_retry_after(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep, caplog: pytest.LogCaptureFixture
) -> None:
    fake.script(wire.error(429, f"rate limit for key {SECRET}", {"Retry-After": "2"}))
    async with wire.make(fake.url, sleep=sleeper) as model:
        with pytest.raises(httpx.HTTPStatusError) as info:
            await model.complete(MESSAGES, TOOLS)
    found = classify_exception(info.value)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.RATE_LIMITED,
        "rate_limited",
        True,
    )
    assert found.retry_after_ms == 2000
    assert sleeper.waits == [pytest.approx(2.0)] * 2
    assert len(fake.requests) == 3
    cause = info.value.__cause__
    assert cause is not None
    assert (
        f"{type(cause).__module__.partition('.')[0]}.{type(cause).__name__}" == wire.sdk_rate_limit
    )
    assert "HTTP 429 Too Many Requests" in str(info.value)
    assert_safe(info.value, caplog)


@pytest.mark.reason("auth_failed")
async def test_401_is_auth_required_and_not_retried(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep, caplog: pytest.LogCaptureFixture
) -> None:
    # Providers echo (part of) a wrong key; none of it may reach our exception.
    fake.script(wire.error(401, f"Incorrect API key provided: {SECRET}"))
    async with wire.make(fake.url, sleep=sleeper) as model:
        with pytest.raises(httpx.HTTPStatusError) as info:
            await model.complete(MESSAGES, TOOLS)
    found = classify_exception(info.value)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.AUTH_REQUIRED,
        "auth_failed",
        False,
    )
    assert len(fake.requests) == 1
    assert sleeper.waits == []
    assert "type test_error" in str(info.value)
    assert_safe(info.value, caplog)


@pytest.mark.reason("http_4xx")
async def test_400_is_not_retried(wire: Wire, fake: FakeProvider, sleeper: FakeSleep) -> None:
    fake.script(wire.error(400, f"bad request: {PROMPT}"))
    async with wire.make(fake.url, sleep=sleeper) as model:
        with pytest.raises(httpx.HTTPStatusError) as info:
            await model.complete(MESSAGES, TOOLS)
    assert classify_exception(info.value).as_tuple() == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "http_4xx",
        False,
    )
    assert len(fake.requests) == 1
    assert PROMPT not in str(info.value)


async def test_500_then_success_backs_off_with_jitter(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep
) -> None:
    fake.script(wire.error(500, "boom"), wire.answer("recovered"))
    async with wire.make(fake.url, sleep=sleeper) as model:
        response = await model.complete(MESSAGES, TOOLS)
    assert (response.content, response.retries) == ("recovered", 1)
    assert len(sleeper.waits) == 1
    assert 0.5 <= sleeper.waits[0] <= 1.0


@pytest.mark.reason("http_5xx")
async def test_5xx_forever_backs_off_exponentially(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep, caplog: pytest.LogCaptureFixture
) -> None:
    fake.script(wire.error(503, "unavailable"))
    async with wire.make(fake.url, sleep=sleeper, max_retries=3) as model:
        with pytest.raises(httpx.HTTPStatusError) as info:
            await model.complete(MESSAGES, TOOLS)
    assert classify_exception(info.value).as_tuple() == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "http_5xx",
        True,
    )
    assert len(fake.requests) == 4
    first, second, third = sleeper.waits
    assert 0.5 <= first <= 1.0
    assert 1.0 <= second <= 1.5
    assert 2.0 <= third <= 2.5
    assert_safe(info.value, caplog)


async def test_retry_after_http_date(wire: Wire, fake: FakeProvider, sleeper: FakeSleep) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=5), usegmt=True)
    fake.script(wire.error(429, "later", {"Retry-After": when}), wire.answer("ok"))
    async with wire.make(fake.url, sleep=sleeper) as model:
        response = await model.complete(MESSAGES, TOOLS)
    assert response.retries == 1
    assert 3.0 <= sleeper.waits[0] <= 5.0


async def test_retry_after_ms_is_preferred(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep
) -> None:
    fake.script(wire.error(429, "later", {"retry-after-ms": "250", "Retry-After": "1"}))
    async with wire.make(fake.url, sleep=sleeper, max_retries=1) as model:
        with pytest.raises(httpx.HTTPStatusError):
            await model.complete(MESSAGES, TOOLS)
    assert sleeper.waits == [pytest.approx(0.25)]


async def test_retry_after_ms_alone_gives_retry_after_ms(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep
) -> None:
    fake.script(wire.error(429, "later", {"retry-after-ms": "1500"}))
    async with wire.make(fake.url, sleep=sleeper, max_retries=0) as model:
        with pytest.raises(httpx.HTTPStatusError) as info:
            await model.complete(MESSAGES, TOOLS)
    assert classify_exception(info.value).retry_after_ms == 1500


async def test_long_retry_after_is_not_waited_out(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep
) -> None:
    fake.script(wire.error(429, "come back in an hour", {"Retry-After": "3600"}))
    async with wire.make(fake.url, sleep=sleeper) as model:
        with pytest.raises(httpx.HTTPStatusError) as info:
            await model.complete(MESSAGES, TOOLS)
    assert sleeper.waits == []
    assert len(fake.requests) == 1
    assert classify_exception(info.value).retry_after_ms == 3_600_000


async def test_server_says_do_not_retry(wire: Wire, fake: FakeProvider, sleeper: FakeSleep) -> None:
    fake.script(wire.error(500, "poisoned request", {"x-should-retry": "false"}))
    async with wire.make(fake.url, sleep=sleeper) as model:
        with pytest.raises(httpx.HTTPStatusError):
            await model.complete(MESSAGES, TOOLS)
    assert len(fake.requests) == 1
    assert sleeper.waits == []


async def test_max_retries_zero(wire: Wire, fake: FakeProvider, sleeper: FakeSleep) -> None:
    fake.script(wire.error(500, "boom"), wire.answer("never reached"))
    async with wire.make(fake.url, sleep=sleeper, max_retries=0) as model:
        with pytest.raises(httpx.HTTPStatusError):
            await model.complete(MESSAGES, TOOLS)
    assert len(fake.requests) == 1


async def test_slow_response_times_out(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep, caplog: pytest.LogCaptureFixture
) -> None:
    fake.script(Reply(hang=True))
    async with wire.make(fake.url, sleep=sleeper, timeout=0.2, max_retries=1) as model:
        with pytest.raises(httpx.TimeoutException) as info:
            await model.complete(MESSAGES, TOOLS)
    found = classify_exception(info.value)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.UPSTREAM_TIMEOUT,
        "timeout",
        True,
    )
    assert isinstance(info.value, httpx.ReadTimeout)
    assert "within 0.2 s" in str(info.value)
    assert len(fake.requests) == 2
    assert len(sleeper.waits) == 1
    assert info.value.__cause__ is not None
    assert_safe(info.value, caplog)


def _refused_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed without listening: connecting is refused


@pytest.mark.reason("network_error")
async def test_connection_refused(
    wire: Wire, sleeper: FakeSleep, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{_refused_port()}"
    async with wire.make(url, sleep=sleeper) as model:
        with pytest.raises(httpx.ConnectError) as info:
            await model.complete(MESSAGES, TOOLS)
    found = classify_exception(info.value)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "network_error",
        True,
    )
    assert len(sleeper.waits) == 2
    assert "could not connect" in str(info.value)
    assert_safe(info.value, caplog)


async def test_cancellation_is_not_converted(wire: Wire, fake: FakeProvider) -> None:
    fake.script(Reply(hang=True))
    sleeper = FakeSleep()
    async with wire.make(fake.url, sleep=sleeper, timeout=30.0) as model:
        task = asyncio.create_task(model.complete(MESSAGES, TOOLS))
        await fake.request_seen.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert sleeper.waits == []
    assert len(fake.requests) == 1


async def test_missing_api_key_names_the_variable(wire: Wire) -> None:
    with pytest.raises(MissingAPIKeyError) as info:
        wire.make("http://127.0.0.1:1", api_key=None)
    env_var = f"{wire.name.upper()}_API_KEY"
    assert env_var in str(info.value)
    assert info.value.details == {"env_var": env_var}
    assert classify_exception(info.value).code is ErrorCode.AUTH_REQUIRED


async def test_api_key_from_the_environment(
    wire: Wire, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"{wire.name.upper()}_API_KEY", "env-key-123")
    fake.script(wire.answer("hi"))
    async with wire.make(fake.url, api_key=None) as model:
        assert "env-key-123" not in repr(model)
        await model.complete(MESSAGES, TOOLS)
    assert wire.key_header(fake.requests[0]) == "env-key-123"


async def test_repr_shows_no_key_or_query(wire: Wire) -> None:
    model = wire.make("http://user:pw@127.0.0.1:1")
    try:
        text = repr(model)
    finally:
        await model.aclose()
    assert SECRET not in text
    assert "pw" not in text
    assert "127.0.0.1:1" in text


async def test_a_body_that_is_no_answer_is_upstream_unavailable(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep
) -> None:
    fake.script(Reply(body="<html>gateway says hi</html>"))
    async with wire.make(fake.url, sleep=sleeper) as model:
        with pytest.raises(ComponentInvokeError) as info:
            await model.complete(MESSAGES, TOOLS)
    assert classify_exception(info.value).code is ErrorCode.UPSTREAM_UNAVAILABLE
    assert "gateway" not in str(info.value)


async def test_the_retries_of_a_failing_call_are_reported(
    wire: Wire, fake: FakeProvider, sleeper: FakeSleep
) -> None:
    """Both adapters: the exception raised after the retries says how many were made; the
    loop's outcome, its record and the A2A error data all report them."""
    fake.script(wire.error(503, "overloaded"))
    model = wire.make(fake.url, max_retries=2, sleep=sleeper)
    outcome = await run_loop(model, ToolRegistry(), "hi")
    assert len(fake.requests) == 3
    assert outcome.status == "model_error"
    assert outcome.model_retries == 2
    assert outcome.classification is not None
    assert outcome.classification.retried == 2
    record = outcome.terminal
    assert record is not None
    assert (record.reason, record.evidence["retried"]) == ("http_5xx", 2)
    data = error_data_for_exception(outcome.classification.exception).to_wire()
    assert (data["errorCode"], data["retried"]) == ("UPSTREAM_UNAVAILABLE", 2)
    assert fake.url.removeprefix("http://") not in record.message
