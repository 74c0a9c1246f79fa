"""Retry by failure kind: every row of the table, with a recorded clock, sleep and rng.

Each test scripts the outcomes of the attempts (exceptions the classification table
already knows, or a value), runs ``call_with_retry`` and asserts the attempts made, the
waits slept (the fake clock advances only by them) and what the final error reports.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import logging
import random
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import httpx
import pytest
from a2a.client.errors import A2AClientHTTPError, A2AClientJSONRPCError, A2AClientTimeoutError
from a2a.types import JSONRPCError, JSONRPCErrorResponse

from llamon_agent.client import RetryKind, RetryPolicy, call_with_retry
from llamon_agent.client.retry import DEFAULT_KINDS
from llamon_agent.core.classify import classify_exception, mark_retried
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import error_data_for_exception
from llamon_agent.core.failures import FailureRecord
from llamon_agent.exceptions import GuardrailBlockedError, LlamonApplicationError
from llamon_agent.loop.providers._retry import RetryPolicy as ProviderRetryPolicy
from llamon_agent.loop.providers._retry import SDKErrorTypes, call_with_retries

UA = ErrorCode.UPSTREAM_UNAVAILABLE
URL = "http://user:pw@agent.internal.example/rpc?token=s3cret"


def status_error(status: int, headers: dict[str, str] | None = None) -> httpx.HTTPStatusError:
    request = httpx.Request("POST", URL)
    response = httpx.Response(status, headers=headers, request=request)
    return httpx.HTTPStatusError(f"HTTP {status} from {URL}", request=request, response=response)


def remote_error(code: str, **data: object) -> A2AClientJSONRPCError:
    """A called llamon agent's JSON-RPC error answer, as a2a-sdk's client raises it."""
    error = JSONRPCError(
        code=-32603,
        message="failed",
        data={"errorCode": code, "errorReason": "remote", "retriable": True, **data},
    )
    return A2AClientJSONRPCError(JSONRPCErrorResponse(id=1, error=error))


class FakeTime:
    """A clock that moves only when the runner sleeps; records every wait."""

    def __init__(self, rolls: Iterable[float] = ()) -> None:
        self.now = 1000.0
        self.waits: list[float] = []
        self._rolls = list(rolls)

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    def rng(self) -> float:
        return self._rolls.pop(0) if self._rolls else 1.0

    @property
    def waited(self) -> float:
        return sum(self.waits)


class Script:
    """The outcomes of the attempts, in order: an exception is raised, a value returned."""

    def __init__(self, *outcomes: object) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    async def __call__(self) -> object:
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


class Refresh:
    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1


async def run(
    script: Script,
    time: FakeTime,
    policy: RetryPolicy | None = None,
    *,
    idempotent: bool = True,
    refresh: Refresh | None = None,
) -> object:
    return await call_with_retry(
        script,
        policy=policy or RetryPolicy(),
        idempotent=idempotent,
        refresh=refresh,
        sleep=time.sleep,
        clock=time.clock,
        rng=time.rng,
        operation="message/send",
    )


# -- UPSTREAM_UNAVAILABLE / 5xx / connection refused or reset: backoff -------------------


async def test_a_5xx_burst_then_success_backs_off_with_full_jitter() -> None:
    """Waits are rng * min(max_delay, base_delay * 2^(n-1)): 0.5, 1, 2, 4 s ceilings."""
    time = FakeTime(rolls=[0.5, 1.0, 0.25, 1.0])
    script = Script(
        status_error(503),
        A2AClientHTTPError(502, "Bad Gateway"),
        httpx.ConnectError("connection refused"),
        remote_error("UPSTREAM_UNAVAILABLE"),
        "answer",
    )
    assert await run(script, time, RetryPolicy(max_attempts=5)) == "answer"
    assert script.calls == 5
    assert time.waits == [0.25, 1.0, 0.5, 4.0]


async def test_connection_reset_is_retried_like_a_5xx() -> None:
    time = FakeTime(rolls=[0.0])
    script = Script(ConnectionResetError(104, "Connection reset by peer"), "answer")
    assert await run(script, time) == "answer"
    assert (script.calls, time.waits) == (2, [0.0])


async def test_jittered_waits_stay_within_the_exponential_ceilings() -> None:
    policy = RetryPolicy(max_attempts=8, deadline=None, base_delay=0.5, max_delay=4.0)
    time = FakeTime()
    time.rng = random.Random(7).random  # type: ignore[method-assign]  # noqa: S311
    script = Script(*[status_error(503)] * 7, "answer")
    assert await run(script, time, policy) == "answer"
    ceilings = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    assert len(time.waits) == len(ceilings)
    assert all(0 <= wait <= ceiling for wait, ceiling in zip(time.waits, ceilings, strict=True))
    assert len(set(time.waits)) == len(time.waits)  # jittered, not a fixed schedule


async def test_max_attempts_exhausted_reports_retried_and_each_attempts_code() -> None:
    time = FakeTime(rolls=[1.0, 1.0, 1.0])
    last = status_error(503)
    script = Script(
        status_error(502), status_error(429), httpx.ConnectError("refused"), last, "never"
    )
    with pytest.raises(httpx.HTTPStatusError) as info:
        await run(script, time)
    assert info.value is last
    assert script.calls == 4
    assert time.waits == [0.5, 1.0, 2.0]
    found = classify_exception(info.value)
    codes = (UA, ErrorCode.RATE_LIMITED, UA, UA)
    assert (found.retried, found.attempt_codes) == (3, codes)
    record = FailureRecord.from_exception(info.value)
    assert record.evidence["retried"] == 3
    assert record.evidence["attempt_codes"] == [code.value for code in codes]
    assert error_data_for_exception(info.value).to_wire()["retried"] == 3


async def test_the_deadline_cuts_waits_and_attempts() -> None:
    """Deadline 1 s: waits 0.5 s, then 0.5 s (the 1 s backoff cut), then no more."""
    time = FakeTime(rolls=[1.0, 1.0, 1.0])
    policy = RetryPolicy(deadline=1.0, base_delay=0.5)
    script = Script(*[status_error(503)] * 4)
    with pytest.raises(httpx.HTTPStatusError) as info:
        await run(script, time, policy)
    assert script.calls == 3
    assert time.waits == [0.5, 0.5]
    assert time.waited == 1.0
    assert classify_exception(info.value).retried == 2


async def test_a_slow_attempt_counts_against_the_deadline() -> None:
    time = FakeTime(rolls=[1.0])

    async def slow() -> object:
        time.now += 2.0  # the attempt itself took 2 s of a 1.5 s deadline
        raise status_error(503)

    with pytest.raises(httpx.HTTPStatusError) as info:
        await call_with_retry(
            slow,
            policy=RetryPolicy(deadline=1.5),
            idempotent=True,
            sleep=time.sleep,
            clock=time.clock,
            rng=time.rng,
        )
    assert time.waits == []
    assert classify_exception(info.value).retried == 0


# -- AUTH_REQUIRED / 401: one refresh; 403: no retry -------------------------------------


@pytest.mark.parametrize(
    "unauthorized",
    [lambda: status_error(401), lambda: A2AClientHTTPError(401, "Unauthorized")],
    ids=["httpx", "a2a-sdk"],
)
async def test_401_refreshes_once_then_succeeds(unauthorized: Callable[[], Exception]) -> None:
    time = FakeTime()
    refresh = Refresh()
    order: list[str] = []
    script = Script(unauthorized(), "answer")

    async def call() -> object:
        order.append(f"call after {refresh.calls} refresh")
        return await script()

    result = await call_with_retry(
        call,
        policy=RetryPolicy(),
        idempotent=False,
        refresh=refresh,
        sleep=time.sleep,
        clock=time.clock,
        rng=time.rng,
    )
    assert result == "answer"
    assert (script.calls, refresh.calls) == (2, 1)
    assert order == ["call after 0 refresh", "call after 1 refresh"]
    assert time.waited == 0


async def test_401_twice_stops_after_one_refresh() -> None:
    time = FakeTime()
    refresh = Refresh()
    script = Script(status_error(401), status_error(401), "never")
    with pytest.raises(httpx.HTTPStatusError) as info:
        await run(script, time, refresh=refresh)
    assert (script.calls, refresh.calls, time.waited) == (2, 1, 0)
    found = classify_exception(info.value)
    auth = ErrorCode.AUTH_REQUIRED
    assert (found.retried, found.attempt_codes) == (1, (auth, auth))


async def test_401_without_a_refresh_callback_is_final() -> None:
    time = FakeTime()
    script = Script(status_error(401), "never")
    with pytest.raises(httpx.HTTPStatusError):
        await run(script, time)
    assert (script.calls, time.waits) == (1, [])


async def test_a_refresh_that_has_nothing_new_ends_the_call_with_the_401() -> None:
    time = FakeTime()
    script = Script(status_error(401), "never")
    refreshed: list[bool] = []

    async def api_key_refresh() -> bool:  # ApiKey.refresh: there is no new key
        refreshed.append(False)
        return False

    with pytest.raises(httpx.HTTPStatusError) as info:
        await call_with_retry(
            script, policy=RetryPolicy(), idempotent=True, refresh=api_key_refresh, sleep=time.sleep
        )
    assert (script.calls, refreshed) == (1, [False])
    found = classify_exception(info.value)
    assert (found.retried, found.attempt_codes) == (0, (ErrorCode.AUTH_REQUIRED,))


async def test_a_refresh_that_fails_ends_the_call_with_its_own_error() -> None:
    time = FakeTime()
    script = Script(status_error(401), "never")

    async def broken() -> None:
        raise LlamonApplicationError(ErrorCode.AUTH_REQUIRED, "token_refresh_failed")

    with pytest.raises(LlamonApplicationError):
        await call_with_retry(
            script, policy=RetryPolicy(), idempotent=True, refresh=broken, sleep=time.sleep
        )
    assert script.calls == 1


async def test_403_is_not_retried() -> None:
    time = FakeTime()
    refresh = Refresh()
    script = Script(A2AClientHTTPError(403, "Forbidden"), "never")
    with pytest.raises(A2AClientHTTPError):
        await run(script, time, refresh=refresh)
    assert (script.calls, refresh.calls, time.waits) == (1, 0, [])


# -- INVALID_INPUT / 400, GUARDRAIL_BLOCKED, NOT_FOUND, INTERNAL_ERROR not retriable ------


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (status_error(400), UA),  # an upstream's 400: its 4xx row, not retriable
        (A2AClientHTTPError(400, "Bad Request"), UA),
        (LlamonApplicationError(ErrorCode.INVALID_INPUT, "bad_input"), ErrorCode.INVALID_INPUT),
        (GuardrailBlockedError("blocked"), ErrorCode.GUARDRAIL_BLOCKED),
        (status_error(404), ErrorCode.NOT_FOUND),
        (LlamonApplicationError(ErrorCode.NOT_FOUND, "task_gone"), ErrorCode.NOT_FOUND),
        (
            LlamonApplicationError(ErrorCode.INTERNAL_ERROR, "boom", retriable=False),
            ErrorCode.INTERNAL_ERROR,
        ),
        (RuntimeError("a bug"), ErrorCode.INTERNAL_ERROR),  # unmapped: never retried
        (
            LlamonApplicationError(ErrorCode.RATE_LIMITED, "daily_quota", retriable=False),
            ErrorCode.RATE_LIMITED,
        ),
    ],
    ids=[
        "http-400",
        "a2a-400",
        "invalid-input",
        "guardrail",
        "http-404",
        "not-found",
        "internal-not-retriable",
        "unmapped",
        "rate-limited-not-retriable",
    ],
)
async def test_a_failure_that_is_not_retriable_is_raised_at_once(
    failure: Exception, code: ErrorCode
) -> None:
    time = FakeTime()
    script = Script(failure, "never")
    with pytest.raises(type(failure)) as info:
        await run(script, time, refresh=Refresh())
    assert info.value is failure
    assert (script.calls, time.waits) == (1, [])
    found = classify_exception(failure)
    assert (found.retried, found.attempt_codes) == (0, (code,))


async def test_an_internal_error_that_says_retriable_is_backed_off() -> None:
    time = FakeTime(rolls=[1.0])
    failure = LlamonApplicationError(ErrorCode.INTERNAL_ERROR, "flaky", retriable=True)
    script = Script(failure, "answer")
    assert await run(script, time) == "answer"
    assert (script.calls, time.waits) == (2, [0.5])


# -- RATE_LIMITED / 429: wait what the server asks, capped by the deadline ---------------


@pytest.mark.parametrize(
    ("limited", "asked"),
    [
        (lambda: status_error(429, {"Retry-After": "3"}), 3.0),
        (lambda: status_error(429, {"retry-after-ms": "1250"}), 1.25),
        (
            lambda: LlamonApplicationError(
                ErrorCode.RATE_LIMITED, "quota", retriable=True, retryAfterMs=1500
            ),
            1.5,
        ),
        (lambda: remote_error("RATE_LIMITED", retryAfterMs=750), 0.75),
    ],
    ids=["retry-after", "retry-after-ms", "retryAfterMs", "a2a-jsonrpc-retryAfterMs"],
)
async def test_429_waits_exactly_what_the_server_asks(
    limited: Callable[[], Exception], asked: float
) -> None:
    time = FakeTime(rolls=[0.0])  # jitter would give 0: the wait is the server's
    script = Script(limited(), limited(), "answer")
    assert await run(script, time) == "answer"
    assert script.calls == 3
    assert time.waits == [asked, asked]


async def test_429_wait_is_capped_by_the_remaining_deadline() -> None:
    time = FakeTime()
    policy = RetryPolicy(deadline=2.0)
    script = Script(status_error(429, {"Retry-After": "5"}), status_error(429), "never")
    with pytest.raises(httpx.HTTPStatusError) as info:
        await run(script, time, policy)
    assert time.waits == [2.0]
    assert script.calls == 2
    found = classify_exception(info.value)
    assert (found.retried, found.attempt_codes) == (1, (ErrorCode.RATE_LIMITED,) * 2)


async def test_429_without_a_wait_backs_off() -> None:
    time = FakeTime(rolls=[0.5])
    script = Script(status_error(429), "answer")
    assert await run(script, time) == "answer"
    assert time.waits == [0.25]


# -- UPSTREAM_TIMEOUT / client timeout: only when idempotent ----------------------------


TIMEOUTS = [
    lambda: httpx.ReadTimeout("read timed out"),
    lambda: A2AClientTimeoutError("timed out"),
    lambda: TimeoutError(),
    lambda: status_error(408),
]
TIMEOUT_IDS = ["httpx", "a2a-sdk", "asyncio", "http-408"]


@pytest.mark.parametrize("make_timeout", TIMEOUTS, ids=TIMEOUT_IDS)
async def test_a_timeout_is_retried_when_the_call_is_idempotent(
    make_timeout: Callable[[], Exception],
) -> None:
    time = FakeTime(rolls=[1.0, 1.0])
    script = Script(make_timeout(), make_timeout(), "answer")
    assert await run(script, time, idempotent=True) == "answer"
    assert (script.calls, time.waits) == (3, [0.5, 1.0])


@pytest.mark.parametrize("make_timeout", TIMEOUTS, ids=TIMEOUT_IDS)
async def test_a_timeout_is_final_when_the_call_is_not_idempotent(
    make_timeout: Callable[[], Exception],
) -> None:
    time = FakeTime()
    script = Script(make_timeout(), "never")
    timed_out = (httpx.TimeoutException, A2AClientTimeoutError, TimeoutError, httpx.HTTPStatusError)
    with pytest.raises(timed_out) as info:
        await run(script, time, idempotent=False)
    assert classify_exception(info.value).code is ErrorCode.UPSTREAM_TIMEOUT
    assert (script.calls, time.waits) == (1, [])


# -- the policy is a value --------------------------------------------------------------


def test_the_policy_defaults_and_is_a_frozen_value() -> None:
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.base_delay, policy.max_delay) == (4, 0.5, 8.0)
    assert policy.kinds == DEFAULT_KINDS
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.max_attempts = 9  # type: ignore[misc]
    assert policy.with_(max_attempts=2) == dataclasses.replace(policy, max_attempts=2)
    assert policy.with_(max_attempts=2) != policy
    assert dataclasses.replace(policy, deadline=None).deadline is None


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"max_attempts": 0}, ValueError),
        ({"max_attempts": True}, TypeError),
        ({"deadline": 0}, ValueError),
        ({"base_delay": 9.0}, ValueError),
    ],
)
def test_an_impossible_policy_is_refused(
    changes: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        dataclasses.replace(RetryPolicy(), **changes)  # type: ignore[arg-type]


async def test_a_per_call_policy_changes_the_table() -> None:
    """Per call: a timeout of a non-idempotent call is backed off once the table says so."""
    policy = RetryPolicy().with_(kinds={ErrorCode.UPSTREAM_TIMEOUT: RetryKind.BACKOFF})
    assert policy.kinds[ErrorCode.RATE_LIMITED] is RetryKind.RETRY_AFTER  # merged
    time = FakeTime(rolls=[1.0])
    script = Script(httpx.ReadTimeout("slow"), "answer")
    assert await run(script, time, policy, idempotent=False) == "answer"
    assert (script.calls, time.waits) == (2, [0.5])


async def test_max_attempts_one_never_retries() -> None:
    time = FakeTime()
    script = Script(status_error(503), "never")
    with pytest.raises(httpx.HTTPStatusError):
        await run(script, time, RetryPolicy(max_attempts=1))
    assert (script.calls, time.waits) == (1, [])


async def test_cancellation_is_never_retried() -> None:
    time = FakeTime()
    script = Script(asyncio.CancelledError(), "never")
    with pytest.raises(asyncio.CancelledError):
        await run(script, time)
    assert script.calls == 1


async def test_each_retry_is_logged_at_info_with_its_reason_and_no_url(
    caplog: pytest.LogCaptureFixture,
) -> None:
    time = FakeTime(rolls=[1.0])
    script = Script(status_error(503), status_error(429, {"Retry-After": "2"}), "answer")
    with caplog.at_level(logging.INFO, logger="llamon_agent.client"):
        await run(script, time)
    lines = [r for r in caplog.records if r.name == "llamon_agent.client"]
    assert [r.levelno for r in lines] == [logging.INFO, logging.INFO]
    messages = [r.getMessage() for r in lines]
    assert messages == [
        "message/send failed (UPSTREAM_UNAVAILABLE http_5xx, HTTP 503); retry 1 of 3 in 0.500 s",
        "message/send failed (RATE_LIMITED rate_limited, HTTP 429); retry 2 of 3 in 2.000 s",
    ]
    assert not any("agent.internal" in m or "s3cret" in m for m in messages)


# -- the one mechanism that carries retries: mark_retried -------------------------------


def test_mark_retried_carries_attempt_codes_through_a_wrapper() -> None:
    inner = status_error(503)
    mark_retried(inner, 1, attempt_codes=[ErrorCode.RATE_LIMITED, "UPSTREAM_UNAVAILABLE", "x"])
    outer = LlamonApplicationError(ErrorCode.UPSTREAM_UNAVAILABLE, "wrapped", retriable=True)
    outer.__cause__ = inner
    found = classify_exception(outer)
    assert (found.retried, found.attempt_codes) == (1, (ErrorCode.RATE_LIMITED, UA))
    assert classify_exception(status_error(503)).attempt_codes == ()


async def test_the_provider_retry_marks_attempt_codes_the_same_way() -> None:
    """The model adapters' retry uses the same mark: retried and each attempt's code."""

    class NoSDKError(Exception):
        pass

    errors = SDKErrorTypes("Fake", NoSDKError, NoSDKError, NoSDKError)
    time = FakeTime()
    script = Script(status_error(429, {"Retry-After": "1"}), status_error(503), "never")
    with pytest.raises(httpx.HTTPStatusError) as info:
        await call_with_retries(
            script,
            policy=ProviderRetryPolicy(max_retries=1, sleep=time.sleep),
            errors=errors,
            attempt_timeout=None,
            operation="chat completion",
        )
    found = classify_exception(info.value)
    assert (found.retried, found.attempt_codes) == (1, (ErrorCode.RATE_LIMITED, UA))


# -- docs/client-retry.md: every Python block runs --------------------------------------

DOC = (Path(__file__).parents[2] / "docs" / "client-retry.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block-{n}" for n in range(len(BLOCKS))])
async def test_every_python_block_of_the_retry_doc_runs(block: str) -> None:
    code = compile(block, "client-retry.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, {"__name__": "client_retry_doc"})  # noqa: S307 - our own document
    if asyncio.iscoroutine(result):
        await result


def test_the_retry_doc_states_the_defaults() -> None:
    policy = RetryPolicy()
    assert len(BLOCKS) >= 2
    assert f"max_attempts={policy.max_attempts}" in DOC
    assert f"deadline={policy.deadline:g}" in DOC
    assert f"base_delay={policy.base_delay:g}" in DOC
    assert f"max_delay={policy.max_delay:g}" in DOC
