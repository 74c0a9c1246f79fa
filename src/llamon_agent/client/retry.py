"""Retry by failure kind: a policy value and the runner that applies it to one call.

Each failure is read through the one classification table as received
(``core.classify.classify_received``: a called agent's own code, not the answer one hop
up): its ``code``, ``retriable``, ``retry_after_ms`` and ``http_status`` decide, never the
exception's type. The policy's ``kinds`` table maps a code to what is done:

=========================  =================  ============================================
code (and status)          kind               what the runner does
=========================  =================  ============================================
``UPSTREAM_UNAVAILABLE``   ``BACKOFF``        exponential backoff with full jitter
(5xx, connection refused
or reset)
``RATE_LIMITED`` (429)     ``RETRY_AFTER``    waits ``retryAfterMs`` / ``Retry-After``
                                              (capped by the remaining deadline); backoff
                                              when the failure names no wait
``AUTH_REQUIRED`` (401)    ``REFRESH``        awaits ``refresh()`` once, tries once more
                                              (stops at once when it returns False)
``AUTH_REQUIRED`` (403)    --                 no retry (``no_retry_statuses``)
``UPSTREAM_TIMEOUT``       ``IF_IDEMPOTENT``  backoff, only when the call is idempotent
``INTERNAL_ERROR``         ``BACKOFF``        only when the failure says ``retriable``
``INVALID_INPUT`` (400),   ``NEVER``          no retry
``GUARDRAIL_BLOCKED``,
``NOT_FOUND``
=========================  =================  ============================================

``BACKOFF``, ``RETRY_AFTER`` and ``IF_IDEMPOTENT`` retry only what the table calls
``retriable`` (an agent that answers ``RATE_LIMITED`` with ``retriable: false`` is not
called again). Every kind is bounded by ``max_attempts`` (attempts, the first one
included) and ``deadline`` (seconds since the first attempt started: no wait runs past
it, no attempt starts after it). A code missing from ``kinds`` is never retried.

The exception the runner finally raises is the last attempt's, marked with
``core.classify.mark_retried``: its classification says ``retried`` (the retries made
before it) and ``attempt_codes`` (each attempt's error code, in order), which the failure
record and the A2A error data report. Each retry is a ``remote.retry`` runner event
(stage ``a2a_call``: reason, code, HTTP status, ``attempt``, ``wait_ms``) when someone
listens (``core.events``). Each retry is logged at INFO on
``llamon_agent.client`` with the code, reason and HTTP status, never a URL or the
exception's text.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final, TypeVar

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from llamon_agent.core.classify import Classification, classify_received, mark_retried
from llamon_agent.core.codes import ErrorCode, Stage
from llamon_agent.core.events import emit, observed

__all__ = [
    "DEFAULT_KINDS",
    "SYSTEM_CLOCK",
    "RetryClock",
    "RetryKind",
    "RetryPolicy",
    "call_with_retry",
]

logger = logging.getLogger("llamon_agent.client")

T = TypeVar("T")


class RetryKind(StrEnum):
    """What the runner does after a failure of one kind (see the module docstring)."""

    BACKOFF = "backoff"
    """Wait an exponential backoff with full jitter, then try again."""
    RETRY_AFTER = "retry_after"
    """Wait what the failure asks (``retryAfterMs``), else back off; then try again."""
    REFRESH = "refresh"
    """Refresh the credentials once (no wait), then try again; never a second time."""
    IF_IDEMPOTENT = "if_idempotent"
    """``BACKOFF`` when the call is idempotent, else ``NEVER``."""
    NEVER = "never"
    """Raise the failure at once."""


DEFAULT_KINDS: Final[Mapping[ErrorCode, RetryKind]] = MappingProxyType(
    {
        ErrorCode.UPSTREAM_UNAVAILABLE: RetryKind.BACKOFF,
        ErrorCode.RATE_LIMITED: RetryKind.RETRY_AFTER,
        ErrorCode.AUTH_REQUIRED: RetryKind.REFRESH,
        ErrorCode.UPSTREAM_TIMEOUT: RetryKind.IF_IDEMPOTENT,
        ErrorCode.INTERNAL_ERROR: RetryKind.BACKOFF,
        ErrorCode.INVALID_INPUT: RetryKind.NEVER,
        ErrorCode.GUARDRAIL_BLOCKED: RetryKind.NEVER,
        ErrorCode.NOT_FOUND: RetryKind.NEVER,
    }
)
"""The retry table by error code (``INTERNAL_ERROR`` only when it says retriable)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a call to another agent is retried; a value, changed with ``with_(...)``.

    ``max_attempts`` counts attempts, the first included; ``deadline`` (seconds, None for
    none) bounds the whole call from the first attempt's start; the backoff before retry
    ``n`` (1, 2, ...) is ``rng() * min(max_delay, base_delay * 2 ** (n - 1))`` (full
    jitter); ``kinds`` maps an error code to a :class:`RetryKind`; a failure whose HTTP
    status is in ``no_retry_statuses`` (403: the credentials are valid but not allowed)
    is never retried.
    """

    max_attempts: int = 4
    deadline: float | None = 30.0
    base_delay: float = 0.5
    max_delay: float = 8.0
    kinds: Mapping[ErrorCode, RetryKind] = field(default_factory=lambda: DEFAULT_KINDS, hash=False)
    no_retry_statuses: frozenset[int] = frozenset({403})

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise TypeError("max_attempts must be an int >= 1")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be an int >= 1")
        if self.deadline is not None and not self.deadline > 0:
            raise ValueError("deadline must be > 0 seconds, or None")
        if not 0 <= self.base_delay <= self.max_delay:
            raise ValueError("delays must satisfy 0 <= base_delay <= max_delay")
        table = {ErrorCode(code): RetryKind(kind) for code, kind in self.kinds.items()}
        object.__setattr__(self, "kinds", MappingProxyType(table))
        object.__setattr__(self, "no_retry_statuses", frozenset(self.no_retry_statuses))

    def with_(
        self,
        *,
        max_attempts: int | None = None,
        deadline: float | None = None,
        base_delay: float | None = None,
        max_delay: float | None = None,
        kinds: Mapping[ErrorCode, RetryKind] | None = None,
        no_retry_statuses: frozenset[int] | None = None,
    ) -> RetryPolicy:
        """A copy with the given fields changed (``kinds`` entries are merged into the
        table); for ``deadline=None`` use ``dataclasses.replace``."""
        changes: dict[str, object] = {
            "max_attempts": max_attempts,
            "deadline": deadline,
            "base_delay": base_delay,
            "max_delay": max_delay,
            "kinds": None if kinds is None else {**self.kinds, **kinds},
            "no_retry_statuses": no_retry_statuses,
        }
        given = {name: value for name, value in changes.items() if value is not None}
        return dataclasses.replace(self, **given)  # type: ignore[arg-type]

    def kind_of(self, found: Classification, *, idempotent: bool) -> RetryKind:
        """What this policy does after the failure ``found`` (``IF_IDEMPOTENT`` resolved)."""
        if found.http_status in self.no_retry_statuses:
            return RetryKind.NEVER
        kind = self.kinds.get(found.code, RetryKind.NEVER)
        if kind is RetryKind.IF_IDEMPOTENT:
            kind = RetryKind.BACKOFF if idempotent else RetryKind.NEVER
        if kind is not RetryKind.REFRESH and not found.retriable:
            return RetryKind.NEVER
        return kind

    def backoff(self, retry: int, rng: Callable[[], float]) -> float:
        """The full-jitter wait before retry number ``retry`` (1 for the first retry)."""
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** max(0, retry - 1))
        return min(ceiling, max(0.0, rng() * ceiling))


@dataclass(frozen=True, slots=True)
class RetryClock:
    """Where retries and polls take their time from: ``sleep`` (waits), ``monotonic`` (the
    deadline's clock) and ``random`` (the jitter, in [0, 1)).

    The default, ``SYSTEM_CLOCK``, is ``asyncio.sleep``, ``time.monotonic`` and
    ``random.random``. Give ``AgentClient(..., clock=RetryClock(...))`` another one to
    record a schedule without waiting (tests), or to share one clock between clients.
    """

    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    monotonic: Callable[[], float] = time.monotonic
    random: Callable[[], float] = random.random


SYSTEM_CLOCK: Final = RetryClock()
"""The real clock: ``asyncio.sleep``, ``time.monotonic``, ``random.random``."""


@dataclass(slots=True)
class _Run:
    """What one call's retrying decided so far."""

    codes: list[ErrorCode] = field(default_factory=list)
    wait: float = 0.0
    refreshed: bool = False
    refresh_next: bool = False
    why: str = ""
    found: Classification | None = None
    last: Exception | None = None


async def call_with_retry(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    idempotent: bool,
    refresh: Callable[[], Awaitable[object]] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: Callable[[], float] = random.random,
    operation: str = "call",
) -> T:
    """Await ``call()`` until it returns, retrying by failure kind under ``policy``.

    Returns what ``call`` returns. Raises the last attempt's exception, marked with the
    retries made before it and each attempt's error code (see the module docstring);
    an exception that is no ``Exception`` (cancellation) is raised at once, unmarked.
    ``idempotent`` says whether a timed-out attempt may be sent again; ``refresh`` is
    awaited once after an ``AUTH_REQUIRED`` failure (without it, that failure is final;
    if it returns False -- an API key cannot be refreshed -- that failure is raised as it
    is; if it raises, its exception ends the call). ``sleep``, ``clock`` and ``rng`` replace
    ``asyncio.sleep``, ``time.monotonic`` and ``random.random`` (tests). ``operation``
    names the call in log lines (``"message/send"``).
    """
    run = _Run()
    started = clock()

    def remaining() -> float | None:
        return None if policy.deadline is None else policy.deadline - (clock() - started)

    def should_retry(exc: BaseException) -> bool:
        if not isinstance(exc, Exception):
            return False
        found = classify_received(exc)
        kind = policy.kind_of(found, idempotent=idempotent)
        left = remaining()
        if kind is RetryKind.NEVER or len(run.codes) >= policy.max_attempts:
            return False
        if left is not None and left <= 0:
            return False
        if kind is RetryKind.REFRESH:
            if refresh is None or run.refreshed:
                return False
            run.refresh_next, wait = True, 0.0
        elif kind is RetryKind.RETRY_AFTER and found.retry_after_ms is not None:
            wait = found.retry_after_ms / 1000
        else:
            wait = policy.backoff(len(run.codes), rng)
        run.wait = wait if left is None else min(wait, left)
        status = f", HTTP {found.http_status}" if found.http_status is not None else ""
        run.why = f"{found.code.value} {found.reason}{status}"
        run.found = found
        return True

    def failed(exc: Exception) -> None:
        run.codes.append(classify_received(exc).code)
        mark_retried(exc, len(run.codes) - 1, attempt_codes=run.codes)
        run.last = exc

    def log_retry(retry: int, wait: float) -> None:
        if observed() and run.found is not None:
            found = run.found
            metadata: dict[str, object] = {
                "failure_reason": found.reason,
                "error_code": found.code.value,
                "retryable": found.retriable,
                "attempt": retry,
                "max_retries": policy.max_attempts - 1,
                "wait_ms": round(wait * 1000),
                "refresh": run.refresh_next,
                "operation": operation,
            }
            if found.http_status is not None:
                metadata["http_status"] = found.http_status
            emit("remote.retry", Stage.A2A_CALL, metadata=metadata)
        action = "refreshing credentials, " if run.refresh_next else ""
        logger.info(
            "%s failed (%s); %sretry %d of %d in %.3f s",
            operation,
            run.why,
            action,
            retry,
            policy.max_attempts - 1,
            wait,
        )

    # The first attempt runs outside tenacity: a call that succeeds pays nothing for it.
    try:
        return await call()
    except Exception as exc:
        failed(exc)
        if not should_retry(exc):
            raise
    log_retry(1, run.wait)
    await sleep(run.wait)
    retrying = AsyncRetrying(
        sleep=sleep,
        stop=stop_after_attempt(max(1, policy.max_attempts - 1)),
        wait=lambda _state: run.wait,
        retry=retry_if_exception(should_retry),
        before_sleep=lambda state: log_retry(state.attempt_number + 1, state.upcoming_sleep),
        reraise=True,
    )
    async for attempt in retrying:
        if run.refresh_next and refresh is not None:
            run.refresh_next, run.refreshed = False, True
            if await refresh() is False and run.last is not None:
                raise run.last  # nothing new to send: the failure that asked for it stands
        with attempt:
            try:
                return await call()
            except Exception as exc:
                failed(exc)
                raise
    raise AssertionError("unreachable: tenacity re-raises the last failure")  # pragma: no cover
