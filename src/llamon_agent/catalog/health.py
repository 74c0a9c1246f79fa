"""Health probes of the catalog's active versions: ``HealthProber``.

What the caller sees:

* ``HealthProber(store)`` runs in the background (``await start()`` / ``await stop()``,
  the shape of the service's lifespan). Each sweep (``await probe_once()``) takes the
  versions the store says are due (``store.due_for_probe(now, batch)``: active versions
  never probed or whose ``next_check`` has passed), probes at most ``concurrency`` of them
  at once, and records what it found (``store.record_health``). The API never waits for
  a probe: the prober only reads and writes the store, a small batch at a time.
* One probe of one version, bounded as a whole by ``timeout`` seconds:

  1. ``GET`` its ``card_url`` (a version published as card JSON: the
     ``/.well-known/agent-card.json`` of its card's ``url``). The answer must be a 2xx
     whose body (at most ``max_card_bytes``) is an A2A AgentCard JSON object; a body
     that is not JSON, or JSON that is not an AgentCard, fails with ``invalid_card``, a
     larger one with ``card_too_large`` (their codes come from the reason catalog).
  2. ``GET {base}/healthz``, where ``base`` is the card URL without its well-known path.
     A ``404`` there is fine (the agent serves no ``/healthz``); any other status outside
     2xx fails.

  Any other failure is classified by the one table (``core.classify``): a refused
  connection is ``UPSTREAM_UNAVAILABLE`` / ``network_error``, a probe that outlives
  ``timeout`` ``UPSTREAM_TIMEOUT`` / ``timeout``, an HTTP status by its row (``503``:
  ``UPSTREAM_UNAVAILABLE`` / ``http_5xx``, ``404`` on the card: ``NOT_FOUND`` /
  ``http_not_found``). Redirects are not followed: a ``3xx`` is a failure.

* What a probe records (``Health``):

  - success: ``healthy``, ``last_seen = checked_at = now``, no error, ``failures = 0``,
    ``next_check = now + interval * (1 + j)`` with ``j`` uniform in ``[-0.1, +0.1)``
    (``j = 0.2 * rng() - 0.1``), so probes of many versions spread out;
  - failure: ``unhealthy`` at once (one failed probe is enough, whatever the state
    before), ``failures`` one more than before, the failure's ``error_code`` and
    ``error_reason``, ``last_seen`` kept, and ``next_check = now + d`` with the capped
    exponential backoff and *equal jitter*::

        base = min(max_backoff, interval * 2 ** (failures - 1))
        d    = base / 2 + rng() * base / 2          # in [base/2, base): never 0

  A version becomes healthy again on its first successful probe.

* Logs (``llamon_agent.catalog``): one INFO line when a version changes state, naming it
  ``name@version`` and never its address (the card URL is a backend address; httpx's and
  httpcore's own lines about a probe, which name it, are dropped)::

      catalog health: orders@2.1.0 healthy -> unhealthy UPSTREAM_UNAVAILABLE network_error

  A sweep that fails because the store does not answer is logged once at WARNING (its
  errorCode and reason only, never the exception's text) until a sweep succeeds again
  (INFO); meanwhile the loop waits with the same backoff and tries again. The loop never
  ends on an exception; only ``stop()`` ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import httpx
from a2a.types import AgentCard
from pydantic import ValidationError

from llamon_agent.catalog.records import AgentVersion, Health
from llamon_agent.catalog.store import CatalogStore
from llamon_agent.core.catalog import reason_spec
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.logs import withhold_http_library_lines

__all__ = [
    "CARD_PATHS",
    "HEALTHZ_PATH",
    "HealthProber",
    "backoff_delay",
    "healthy_delay",
]

logger = logging.getLogger("llamon_agent.catalog")

HEALTHZ_PATH: Final = "/healthz"
"""Probed under the agent's base URL after its card; a 404 means the agent has none."""
CARD_PATHS: Final = ("/.well-known/agent-card.json", "/.well-known/agent.json")
"""Well-known card paths; stripped from a card URL to find the agent's base URL."""
JITTER: Final = 0.1
"""A healthy version's next probe is ``interval`` plus or minus this fraction."""
DEFAULT_MAX_CARD_BYTES: Final = 256 * 1024
STOP_BOUND: Final = 5.0
"""``stop()`` waits at most this long for cancelled probes to end."""

Sleep = Callable[[float], Awaitable[object]]


def healthy_delay(interval: float, rng: Callable[[], float]) -> float:
    """Seconds until a healthy version's next probe: ``interval * (1 + 0.2 * rng() - 0.1)``."""
    return interval * (1.0 + JITTER * (2.0 * rng() - 1.0))


def backoff_delay(
    failures: int, interval: float, max_backoff: float, rng: Callable[[], float]
) -> float:
    """Seconds until the next probe after ``failures`` failed probes in a row (>= 1):
    ``base = min(max_backoff, interval * 2 ** (failures - 1))``, then equal jitter
    ``base / 2 + rng() * base / 2`` (never below half the base, so never 0)."""
    exponent = max(0, failures - 1)
    base = max_backoff if exponent >= 64 else min(max_backoff, interval * 2.0**exponent)
    return base / 2.0 + rng() * base / 2.0


class _CardRefused(Exception):
    """The card URL answered, but not with a usable card; ``reason`` names why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _probe_urls(version: AgentVersion) -> tuple[str, str]:
    """``(card URL, /healthz URL)`` of ``version``; ``_CardRefused`` when it has none."""
    card_url = version.card_url
    if not card_url:
        declared = version.card.get("url")
        if not isinstance(declared, str):
            raise _CardRefused("invalid_card")
        parts = urlsplit(declared)
        card_url = urlunsplit((parts.scheme, parts.netloc, CARD_PATHS[0], "", ""))
    parts = urlsplit(card_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _CardRefused("invalid_card")
    path = parts.path
    for suffix in CARD_PATHS:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    else:
        path = ""
    base = urlunsplit((parts.scheme, parts.netloc, path.rstrip("/"), "", ""))
    return card_url, base + HEALTHZ_PATH


def _error_of(exc: Exception) -> tuple[str, str]:
    """``(errorCode, errorReason)`` of a failed probe, from the reason catalog or the one
    classification table."""
    if isinstance(exc, _CardRefused):
        spec = reason_spec(exc.reason)
        code = spec.error_code if spec is not None else ErrorCode.INVALID_INPUT
        return code.value, exc.reason
    found = classify_exception(exc)
    return found.code.value, found.reason


class HealthProber:
    """Probes the catalog's active versions in the background (see the module docstring).

    ``clock`` (epoch seconds), ``rng`` (uniform in ``[0, 1)``) and ``sleep`` are injectable;
    ``http`` is used as given (and left open) or, when ``None``, one is made and closed
    by ``stop()``. ``poll`` is how long an idle loop waits before asking the store again
    (default ``min(interval, 5)``); ``wake()`` ends that wait early (after a publish).
    """

    def __init__(
        self,
        store: CatalogStore,
        *,
        interval: float = 30.0,
        timeout: float = 5.0,
        concurrency: int = 8,
        max_backoff: float = 600.0,
        batch: int = 100,
        http: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
        rng: Callable[[], float] = random.random,
        sleep: Sleep = asyncio.sleep,
        poll: float | None = None,
        max_card_bytes: int = DEFAULT_MAX_CARD_BYTES,
    ) -> None:
        for label, value in (("interval", interval), ("timeout", timeout)):
            if value <= 0:
                raise ValueError(f"HealthProber: {label} must be above 0, not {value}")
        if max_backoff < interval:
            raise ValueError(
                f"HealthProber: max_backoff ({max_backoff}) must be at least interval ({interval})"
            )
        if concurrency < 1 or batch < 1:
            raise ValueError("HealthProber: concurrency and batch must be at least 1")
        self._store = store
        self._interval = interval
        self._timeout = timeout
        self._concurrency = concurrency
        self._max_backoff = max_backoff
        self._batch = batch
        self._given_http = http
        self._own_http: httpx.AsyncClient | None = None
        self._clock = clock
        self._rng = rng
        self._sleep = sleep
        self._poll = poll if poll is not None else min(interval, 5.0)
        self._max_card_bytes = max_card_bytes
        self._loop_task: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        """Whether the background loop runs."""
        return self._loop_task is not None and not self._loop_task.done()

    async def start(self) -> None:
        """Start the background loop (a no-op when it already runs)."""
        if self.running:
            return
        self._loop_task = asyncio.create_task(self._run(), name="llamon-catalog-health")

    async def stop(self) -> None:
        """End the loop and cancel the probes in flight; returns within a few seconds
        whatever the probed agents do. Safe to call twice, or without ``start()``."""
        tasks: list[asyncio.Task[None]] = [*self._inflight]
        if self._loop_task is not None:
            tasks.append(self._loop_task)
            self._loop_task = None
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=STOP_BOUND)
            if pending:
                logger.warning(
                    "catalog health: %d probe(s) did not end within %.0fs of stop",
                    len(pending),
                    STOP_BOUND,
                )
        if self._own_http is not None:
            http, self._own_http = self._own_http, None
            with contextlib.suppress(Exception):
                await http.aclose()

    def wake(self) -> None:
        """Ask the loop to sweep now instead of at the end of its wait."""
        self._wake.set()

    # ------------------------------------------------------------------ one sweep

    async def probe_once(self) -> int:
        """One sweep: probe the versions due now (at most ``batch``, ``concurrency`` at
        once) and record each one's health as soon as it is probed; returns how many were
        probed. What the store raises is raised (the loop logs it and goes on)."""
        due = await self._store.due_for_probe(self._clock(), self._batch)
        if not due:
            return 0
        gate = asyncio.Semaphore(self._concurrency)
        tasks = [asyncio.create_task(self._probe_and_record(gate, v)) for v in due]
        self._inflight.update(tasks)
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            self._inflight.difference_update(tasks)
        return len(due)

    async def _probe_and_record(self, gate: asyncio.Semaphore, version: AgentVersion) -> None:
        """Probe ``version`` once ``gate`` lets it, then record (and log) what it found."""
        async with gate:
            health = await self._probe(version)
        await self._store.record_health(version.name, version.version, health)
        self._log_change(version, health)

    async def _probe(self, version: AgentVersion) -> Health:
        """What one probe of ``version`` finds (never raises but for cancellation)."""
        before = version.health
        withhold_http_library_lines()  # this task's own context: its HTTP lines name the address
        try:
            async with asyncio.timeout(self._timeout):
                await self._check(version)
        except Exception as exc:
            code, reason = _error_of(exc)
            failures = before.failures + 1
            now = self._clock()
            delay = backoff_delay(failures, self._interval, self._max_backoff, self._rng)
            return Health(
                state="unhealthy",
                checked_at=now,
                last_seen=before.last_seen,
                error_code=code,
                error_reason=reason,
                failures=failures,
                next_check=now + delay,
            )
        now = self._clock()
        return Health(
            state="healthy",
            checked_at=now,
            last_seen=now,
            failures=0,
            next_check=now + healthy_delay(self._interval, self._rng),
        )

    async def _check(self, version: AgentVersion) -> None:
        """Raise what makes ``version`` unhealthy; return when it answers."""
        card_url, healthz_url = _probe_urls(version)
        http = self._http()
        async with http.stream("GET", card_url) as response:
            response.raise_for_status()
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > self._max_card_bytes:
                    raise _CardRefused("card_too_large")
        try:
            AgentCard.model_validate(json.loads(bytes(body)))
        except (ValueError, ValidationError) as exc:  # JSONDecodeError is a ValueError
            raise _CardRefused("invalid_card") from exc
        response = await http.get(healthz_url)
        if response.status_code != 404:
            response.raise_for_status()

    def _http(self) -> httpx.AsyncClient:
        if self._given_http is not None:
            return self._given_http
        if self._own_http is None:
            self._own_http = httpx.AsyncClient(
                timeout=self._timeout,
                follow_redirects=False,
                trust_env=False,
                headers={"User-Agent": "llamon-catalog-health"},
            )
        return self._own_http

    def _log_change(self, version: AgentVersion, health: Health) -> None:
        before = version.health.state
        if before == health.state:
            return
        error = f" {health.error_code} {health.error_reason}" if health.state == "unhealthy" else ""
        logger.info(
            "catalog health: %s@%s %s -> %s%s",
            version.name,
            version.version,
            before,
            health.state,
            error,
        )

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                probed = await self.probe_once()
            except Exception as exc:
                failures += 1
                delay = backoff_delay(failures, self._interval, self._max_backoff, self._rng)
                if failures == 1:
                    code, reason = _error_of(exc)
                    logger.warning(
                        "catalog health: the catalog store did not answer (%s %s); "
                        "probes wait and try again",
                        code,
                        reason,
                    )
                await self._pause(delay)
                continue
            if failures:
                logger.info("catalog health: the catalog store answers again")
                failures = 0
            if probed >= self._batch:
                await asyncio.sleep(0)  # more are due: go on, letting others run first
                continue
            await self._pause(self._poll)

    async def _pause(self, delay: float) -> None:
        """Wait ``delay`` seconds (the injected ``sleep``), or until ``wake()``."""
        if self._wake.is_set():
            self._wake.clear()
            return
        sleeper = asyncio.ensure_future(self._sleep(delay))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait((sleeper, waker), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()
        self._wake.clear()
