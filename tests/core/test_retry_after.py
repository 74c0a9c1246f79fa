"""The one Retry-After reader: ``retry-after-ms``, delta-seconds, HTTP date, garbage."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest

from llamon_agent.core.retry_after import parse_retry_after_ms, read_retry_after_ms

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SRC = Path(__file__).parents[2] / "src" / "llamon_agent"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500"}, 1500),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1500),
        ({"retry-after-ms": "0.2"}, 1),
        ({"retry-after-ms": "-20"}, 0),
        ({"retry-after": "30"}, 30_000),
        ({"retry-after": "1.5"}, 1500),
        ({"retry-after": " 7 "}, 7000),
        ({"retry-after": "-3"}, 0),
        ({"retry-after": format_datetime(NOW + timedelta(seconds=120), usegmt=True)}, 120_000),
        ({"retry-after": "Sun, 01 Nov 2026 00:00:00 GMT"}, 0),
        ({"retry-after-ms": "junk", "retry-after": "3"}, 3000),
        ({"retry-after-ms": "nan", "retry-after": "2"}, 2000),
        ({"retry-after-ms": "inf"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "1e400"}, None),
        ({"retry-after": ""}, None),
        ({}, None),
    ],
)
def test_every_form_and_garbage(headers: dict[str, str], expected: int | None) -> None:
    assert read_retry_after_ms(httpx.Headers(headers), now=NOW) == expected
    assert read_retry_after_ms(headers, now=NOW) == expected


def test_header_names_are_case_insensitive_with_httpx_headers() -> None:
    assert read_retry_after_ms(httpx.Headers({"Retry-After": "4"})) == 4000
    assert read_retry_after_ms(httpx.Headers({"Retry-After-Ms": "40"})) == 40


def test_no_headers_and_non_text_values_are_none() -> None:
    assert read_retry_after_ms(None) is None
    assert read_retry_after_ms({"retry-after": 5}) is None


def test_parse_a_single_value() -> None:
    assert parse_retry_after_ms("2") == 2000
    assert parse_retry_after_ms(None) is None
    assert parse_retry_after_ms("Mon, 30 Nov 2026 12:00:10", now=NOW) == 10_000  # no zone: UTC


def test_the_classification_and_the_provider_retry_share_the_reader() -> None:
    from llamon_agent.core import classify
    from llamon_agent.loop.providers import _retry

    assert classify.parse_retry_after_ms is parse_retry_after_ms
    assert vars(classify)["read_retry_after_ms"] is read_retry_after_ms
    assert vars(_retry)["read_retry_after_ms"] is read_retry_after_ms


def test_no_second_retry_after_parser_in_the_package() -> None:
    parsers = re.compile(r"parsedate_to_datetime|\.get\(\s*[\"']retry-after")
    found = [
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if path.name != "retry_after.py" and parsers.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []
