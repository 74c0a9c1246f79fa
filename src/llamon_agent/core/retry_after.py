"""The one reader of an upstream's "wait this long before retrying" headers.

Both the classification (``core.classify``: a 429's ``retryAfterMs``) and the provider
adapters' retries (``loop.providers``: how long to sleep) read the same headers here:

* ``retry-after-ms`` (OpenAI, Anthropic): milliseconds, preferred when it is a number;
* ``Retry-After`` as delta-seconds (``"30"``, ``"1.5"``);
* ``Retry-After`` as an HTTP date (``"Sun, 01 Nov 2026 00:00:00 GMT"``), relative to now.

Every answer is whole milliseconds, rounded up, never negative (a date in the past is
``0``); absent or unreadable values (``"soon"``, ``"nan"``, ``"inf"``) are ``None``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Protocol

__all__ = ["HeaderSource", "parse_retry_after_ms", "read_retry_after_ms"]


class HeaderSource(Protocol):
    """Anything with ``get(name)``: ``httpx.Headers``, ``httpx2.Headers``, a ``dict``."""

    def get(self, key: str, /) -> object:
        """The header's value, or None."""
        ...


def _whole_ms(millis: float) -> int | None:
    if not math.isfinite(millis):
        return None
    return max(0, math.ceil(millis))


def parse_retry_after_ms(value: str | None, *, now: datetime | None = None) -> int | None:
    """``Retry-After`` (delta-seconds or HTTP-date) as milliseconds >= 0; None if absent/bad."""
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return _whole_ms(seconds * 1000)


def _header(headers: HeaderSource, name: str) -> str | None:
    value = headers.get(name)
    return value if isinstance(value, str) else None


def read_retry_after_ms(headers: HeaderSource | None, *, now: datetime | None = None) -> int | None:
    """``retry-after-ms`` when it is a number, else ``Retry-After``, in milliseconds >= 0.

    ``headers`` is looked up by lower-case name (``httpx`` headers are case-insensitive);
    None, or neither header readable, gives None.
    """
    if headers is None:
        return None
    raw_ms = _header(headers, "retry-after-ms")
    if raw_ms is not None:
        try:
            millis = _whole_ms(float(raw_ms))
        except ValueError:
            millis = None
        if millis is not None:
            return millis
    return parse_retry_after_ms(_header(headers, "retry-after"), now=now)
