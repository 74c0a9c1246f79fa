"""Retries and error conversion shared by the provider adapters.

Both provider SDKs (``openai``, ``anthropic``) are built the same way: an ``APIStatusError``
that carries the HTTP ``response``, an ``APITimeoutError`` and an ``APIConnectionError``
whose ``__cause__`` is the transport exception. The adapters switch the SDKs' own retries
off and call :func:`call_with_retries`, which

1. converts every SDK failure into an exception the one table (``core.classify``) already
   maps -- ``httpx.HTTPStatusError`` (by status: 429 -> ``RATE_LIMITED`` with
   ``retryAfterMs``, 401/403 -> ``AUTH_REQUIRED``, 5xx -> ``UPSTREAM_UNAVAILABLE``),
   ``httpx.TimeoutException`` (``UPSTREAM_TIMEOUT``), ``httpx.ConnectError`` /
   ``httpx.TransportError`` (``UPSTREAM_UNAVAILABLE``) -- keeping the SDK error as
   ``__cause__``;
2. retries with tenacity what that table calls retriable, honouring ``Retry-After``
   (``retry-after-ms``, delta-seconds or an HTTP date), else exponential backoff with
   jitter, at most ``max_retries`` times;
3. returns the result with the number of retries it took, or raises the last converted
   exception, marked (``core.classify.mark_retried``) with the retries made before it and
   each attempt's error code, so the client's ``retried`` and the failure record
   (``retried``, ``attempt_codes``) say how often the server tried, and why.

A Quality Lab fault (``model_rate_limited``, ``model_server_error``) meets these retries
through :func:`first_attempt_fails`: inside it, the next :func:`call_with_retries` fails
its first attempt with the injected error, without calling the provider, and goes on by
its policy (a 429 with ``Retry-After`` is waited out and tried again).

Runner events (when someone listens, ``core.events``): ``model.attempt`` before each
attempt (``attempt`` from 1), ``model.retry`` before each wait (the failure's reason,
code and ``http_status``, ``attempt``, ``wait_ms``).

The converted exception is built from safe parts only: the provider's name, the method,
the URL without user-info or query, the status, the provider's short error type/code and
request id. Its ``request`` and ``response`` are fresh ``httpx`` objects holding no
credentials (no ``Authorization`` / ``x-api-key`` header), no request body and no response
body; the SDK's original error, which may hold all of those, stays reachable as
``__cause__`` for debugging inside the process only.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Final, TypeVar

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_exponential, wait_random

from llamon_agent.core.classify import classify_exception, mark_retried
from llamon_agent.core.codes import ErrorCode, Stage
from llamon_agent.core.events import emit, observed
from llamon_agent.core.retry_after import read_retry_after_ms

__all__ = [
    "DEFAULT_INITIAL_WAIT",
    "DEFAULT_JITTER",
    "DEFAULT_MAX_RETRY_AFTER",
    "DEFAULT_MAX_WAIT",
    "RetryPolicy",
    "SDKErrorTypes",
    "SleepFn",
    "call_with_retries",
    "convert_sdk_error",
    "first_attempt_fails",
    "retry_after_seconds",
    "safe_url",
]

logger = logging.getLogger("llamon_agent.loop.providers")

T = TypeVar("T")

SleepFn = Callable[[float], Awaitable[None]]
"""``await sleep(seconds)`` between attempts; tests pass a fake that records the waits."""

DEFAULT_INITIAL_WAIT: Final = 0.5
"""Backoff before the first retry, in seconds (doubled for each further retry)."""
DEFAULT_MAX_WAIT: Final = 8.0
"""Upper bound of the exponential backoff, in seconds."""
DEFAULT_JITTER: Final = 0.5
"""Up to this many random seconds are added to every backoff wait."""
DEFAULT_MAX_RETRY_AFTER: Final = 60.0
"""A ``Retry-After`` longer than this is not waited out: the 429/503 is raised at once, so
the caller sees ``retryAfterMs`` and decides (the SDKs' own limit is 120 s)."""

_KEPT_HEADERS: Final = (
    "retry-after",
    "retry-after-ms",
    "x-should-retry",
    "x-request-id",
    "request-id",
)
"""Response headers copied onto the converted ``httpx.Response``; nothing else is."""

_SAFE_TOKEN: Final = re.compile(r"[A-Za-z0-9_.:-]{1,80}")


@dataclass(frozen=True, slots=True)
class SDKErrorTypes:
    """One SDK's exception classes (``APIStatusError``, ``APITimeoutError``, ...)."""

    provider: str
    """Human name used in messages: ``"OpenAI"``, ``"Anthropic"``."""
    status: type[Exception]
    timeout: type[Exception]
    connection: type[Exception]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long an adapter retries a retriable failure."""

    max_retries: int = 2
    sleep: SleepFn = field(default=asyncio.sleep)
    initial_wait: float = DEFAULT_INITIAL_WAIT
    max_wait: float = DEFAULT_MAX_WAIT
    jitter: float = DEFAULT_JITTER
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int):
            raise TypeError("max_retries must be an int >= 0")
        if self.max_retries < 0:
            raise ValueError("max_retries must be an int >= 0")

    def should_retry(self, exc: BaseException) -> bool:
        """Retry what the table calls retriable, unless the server said otherwise."""
        if not isinstance(exc, Exception):  # CancelledError, KeyboardInterrupt: never
            return False
        if not classify_exception(exc).retriable:
            return False
        if isinstance(exc, httpx.HTTPStatusError):
            headers = exc.response.headers
            if headers.get("x-should-retry", "").strip().lower() == "false":
                return False
            after = retry_after_seconds(headers)
            if after is not None and after > self.max_retry_after:
                return False
        return True

    def wait_seconds(self, state: RetryCallState) -> float:
        """``Retry-After`` when the failure carries one, else exponential backoff + jitter."""
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, httpx.HTTPStatusError):
            after = retry_after_seconds(exc.response.headers)
            if after is not None:
                return after
        # wait_exponential + wait_random: the same in every tenacity >= 8.2.
        backoff = wait_exponential(multiplier=self.initial_wait, max=self.max_wait) + wait_random(
            0, self.jitter
        )
        return float(backoff(state))


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """``retry-after-ms``, else ``Retry-After`` (seconds or HTTP date), as seconds >= 0.

    Read by ``core.retry_after`` (the one reader the classification uses too).
    """
    millis = read_retry_after_ms(headers)
    return None if millis is None else millis / 1000


_first_failure: ContextVar[Exception | None] = ContextVar(
    "llamon_model_first_attempt_fails", default=None
)


@contextmanager
def first_attempt_fails(error: Exception) -> Iterator[None]:
    """Inside the block, the next ``call_with_retries`` raises ``error`` as the result of
    its first attempt (the provider is not called for it), then retries by its policy.

    How a fault plan's injected provider failure (``loop.model_call``) goes through an
    adapter's own retries, as a real 429 or 5xx would.
    """
    token = _first_failure.set(error)
    try:
        yield
    finally:
        _first_failure.reset(token)


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    errors: SDKErrorTypes,
    attempt_timeout: float | None,
    operation: str,
) -> tuple[T, int]:
    """Run ``call`` with retries; return ``(result, retries)`` or raise a mapped exception.

    The exception raised carries the retries made before it (``mark_retried``).

    ``attempt_timeout`` (seconds) only goes into the text of a timeout error.
    ``operation`` names the call in log lines (``"chat completion"``); it and the
    classification's reason are all that is logged, never an exception's text.
    """

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        reason = classify_exception(exc).reason if exc is not None else "unknown"
        status = (
            f" HTTP {exc.response.status_code}" if isinstance(exc, httpx.HTTPStatusError) else ""
        )
        wait = state.upcoming_sleep
        if observed():
            found = classify_exception(exc) if exc is not None else None
            metadata: dict[str, object] = {
                "failure_reason": reason,
                "error_code": found.code.value if found is not None else "INTERNAL_ERROR",
                "retryable": True,
                "attempt": state.attempt_number,
                "max_retries": policy.max_retries,
                "wait_ms": round(wait * 1000),
                "provider": errors.provider,
                "operation": operation,
            }
            if isinstance(exc, httpx.HTTPStatusError):
                metadata["http_status"] = exc.response.status_code
            emit("model.retry", Stage.MODEL_CALL, metadata=metadata)
        logger.warning(
            "%s %s failed (%s%s); retry %d of %d in %.2f s",
            errors.provider,
            operation,
            reason,
            status,
            state.attempt_number,
            policy.max_retries,
            wait,
        )

    retrying = AsyncRetrying(
        sleep=policy.sleep,
        stop=stop_after_attempt(policy.max_retries + 1),
        wait=policy.wait_seconds,
        retry=retry_if_exception(policy.should_retry),
        before_sleep=before_sleep,
        reraise=True,
    )
    codes: list[ErrorCode] = []
    injected = _first_failure.get()
    if injected is not None:  # a fault plan's: for this call only
        _first_failure.set(None)
    async for attempt in retrying:
        with attempt:
            retries = attempt.retry_state.attempt_number - 1
            if observed():
                emit(
                    "model.attempt",
                    Stage.MODEL_CALL,
                    metadata={"attempt": retries + 1, "provider": errors.provider},
                )
            try:
                if injected is not None and retries == 0:
                    raise injected
                result = await call()
            except (errors.status, errors.connection) as err:  # timeouts are connection errors
                converted = _convert(err, errors, attempt_timeout)
                codes.append(classify_exception(converted).code)
                mark_retried(converted, retries, attempt_codes=codes)
                raise converted from err
            except Exception as exc:
                codes.append(classify_exception(exc).code)
                mark_retried(exc, retries, attempt_codes=codes)
                raise
            return result, retries
    raise AssertionError("unreachable: tenacity re-raises the last failure")  # pragma: no cover


def convert_sdk_error(
    err: Exception, errors: SDKErrorTypes, *, timeout: float | None = None
) -> Exception | None:
    """The mapped exception for an SDK failure (``None`` if ``err`` is no SDK API error).

    The caller raises it ``from err``.
    """
    if isinstance(err, errors.status | errors.connection):
        return _convert(err, errors, timeout)
    return None


def _convert(err: Exception, errors: SDKErrorTypes, timeout: float | None) -> Exception:
    request = _safe_request(getattr(err, "request", None))
    where = f"{request.method} {request.url}"
    if isinstance(err, errors.status):
        return _status_error(err, errors.provider, request)
    if isinstance(err, errors.timeout):
        within = f" within {timeout:g} s" if timeout is not None else " in time"
        timeout_cls = _httpx_twin(err, httpx.TimeoutException)
        return timeout_cls(f"{errors.provider} API did not answer {where}{within}", request=request)
    transport_cls = _httpx_twin(err, httpx.TransportError)
    if transport_cls is httpx.TransportError or issubclass(transport_cls, httpx.ConnectError):
        connect_cls = httpx.ConnectError if transport_cls is httpx.TransportError else transport_cls
        detail = _os_error_text(err)
        message = f"could not connect to {errors.provider} API for {where}{detail}"
        return connect_cls(message, request=request)
    message = f"{errors.provider} API connection failed during {where} ({transport_cls.__name__})"
    return transport_cls(message, request=request)


def _status_error(err: Exception, provider: str, request: httpx.Request) -> httpx.HTTPStatusError:
    source = getattr(err, "response", None)
    raw_status = getattr(source, "status_code", None)
    if not isinstance(raw_status, int):
        raw_status = getattr(err, "status_code", None)
    status = raw_status if isinstance(raw_status, int) and 100 <= raw_status <= 999 else 500
    source_headers = getattr(source, "headers", None)
    headers: dict[str, str] = {}
    for name in _KEPT_HEADERS:
        value = source_headers.get(name) if source_headers is not None else None
        if isinstance(value, str) and len(value) <= 200:
            headers[name] = value
    if "retry-after" not in headers and "retry-after-ms" in headers:
        # The table reads Retry-After; carry the provider's millisecond hint there as well.
        seconds = retry_after_seconds(httpx.Headers(headers))
        if seconds is not None:
            headers["retry-after"] = f"{seconds:g}"
    response = httpx.Response(status, headers=headers, request=request)
    details: list[str] = []
    for label, attr in (("type", "type"), ("code", "code"), ("code", "error_code")):
        value = getattr(err, attr, None)
        if isinstance(value, str) and _SAFE_TOKEN.fullmatch(value):
            entry = f"{label} {value}"
            if entry not in details:
                details.append(entry)
    request_id = headers.get("x-request-id") or headers.get("request-id")
    if request_id and _SAFE_TOKEN.fullmatch(request_id):
        details.append(f"request id {request_id}")
    phrase = f" {response.reason_phrase}" if response.reason_phrase else ""
    message = f"{provider} API answered HTTP {status}{phrase} to {request.method} {request.url}"
    if details:
        message += f" ({', '.join(details)})"
    return httpx.HTTPStatusError(message, request=request, response=response)


def safe_url(url: object) -> str:
    """``scheme://host[:port]/path`` of a URL: no user-info, query or fragment."""
    try:
        parsed = httpx.URL(str(url))
    except (TypeError, ValueError, httpx.InvalidURL):
        return "<invalid url>"
    host = parsed.host
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    port = f":{parsed.port}" if parsed.port is not None else ""
    return f"{parsed.scheme}://{host}{port}{parsed.path}"


def _safe_request(source: object) -> httpx.Request:
    method = getattr(source, "method", None)
    if isinstance(method, bytes):
        method = method.decode("ascii", "replace")
    if not isinstance(method, str) or not method.isalpha():
        method = "POST"
    return httpx.Request(method.upper(), safe_url(getattr(source, "url", "")))


def _chain(err: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and current not in seen and len(seen) < 16:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _httpx_twin(err: BaseException, base: type[httpx.TransportError]) -> type[httpx.TransportError]:
    """The ``httpx`` class named like the transport error (httpx2's) under the SDK error."""
    for inner in _chain(err)[1:]:
        if type(inner).__module__.partition(".")[0] not in ("httpx", "httpx2"):
            continue
        twin = getattr(httpx, type(inner).__name__, None)
        if isinstance(twin, type) and issubclass(twin, base):
            return twin
    return base


def _os_error_text(err: BaseException) -> str:
    """``" ([Errno 111] Connect call failed ...)"``: the OS's words, never a payload."""
    for inner in _chain(err):
        if isinstance(inner, OSError) and inner.strerror:
            name = type(inner).__name__
            return f" ({name}: {inner.strerror})"
    return ""
