"""The security boundary: no credential or personal datum survives; operational data does."""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import hmac
import json
import re
import time
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llamon_agent.core import scrub
from llamon_agent.core.scrub import (
    REDACTED,
    _scrub_cached,
    _strip_locations_cached,
    allow_evidence_keys,
    incident_message,
    keyed_hash,
    scrub_evidence,
    scrub_forwarded,
    scrub_public_text,
    scrub_text,
    scrub_value,
    set_hash_key,
    strip_locations,
)
from tests._support.boundary_cases import reveals
from tests._support.secret_strategies import (
    SECRET_KINDS,
    SecretSample,
    innocent_evidence,
    secret_samples,
)

PROPERTY = settings(max_examples=200, deadline=None, derandomize=True, database=None)
HEX16 = re.compile(r"[0-9a-f]{16}")


def leaks(value: str, output: str, *, context: str = "") -> bool:
    """True when ``output`` holds ``value`` or any 8-character piece of it.

    Pieces that also occur in ``context`` (the innocent text around the secret, which may
    by chance repeat part of it) do not count.
    """
    if len(value) < 8:
        return value in output and value not in context
    pieces = {value[i : i + 8] for i in range(len(value) - 7)}
    return any(piece in output and piece not in context for piece in pieces)


_MARKER_WORDS = (
    " ".join(
        f"[REDACTED:{kind}]"
        for kind in ("token", "jwt", "api_key", "secret", "password", "cookie", "session")
    )
    + " [REDACTED:user_id] [REDACTED:email] [REDACTED:phone] [REDACTED] …[truncated]"
)


def context_of(sample: SecretSample, *extra: str) -> str:
    """The text around ``sample.value``: its template, the markers and any extra text."""
    return "\n".join([sample.text.replace(sample.value, "\n"), _MARKER_WORDS, *extra])


def all_strings(obj: object) -> Iterator[str]:
    """Every key and string value inside a scrubbed evidence structure."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield str(key)
            yield from all_strings(value)
    elif isinstance(obj, list | tuple):
        for item in obj:
            yield from all_strings(item)


def evidence_leaks(value: str, result: object, context: str = "") -> bool:
    return any(leaks(value, text, context=context) for text in all_strings(result))


@pytest.fixture
def restore_scrub_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo hash-key and allow-list changes made by the test."""
    for name in ("_hash_key", "_allowed_keys", "_allowed_suffixes"):
        monkeypatch.setattr(scrub, name, getattr(scrub, name))


# -- the public surface -------------------------------------------------------------------


def test_public_api_is_exactly_the_documented_names() -> None:
    assert scrub.__all__ == sorted(scrub.__all__)
    assert set(scrub.__all__) == {
        "REDACTED",
        "allow_evidence_keys",
        "keyed_hash",
        "scrub_evidence",
        "scrub_forwarded",
        "scrub_log_text",
        "scrub_public_text",
        "scrub_text",
        "scrub_value",
        "set_hash_key",
        "strip_locations",
    }
    assert REDACTED == "[REDACTED]"


# -- properties: secrets never survive ---------------------------------------------------

_CONTEXT = st.one_of(
    st.sampled_from(
        [
            "",
            "request failed:",
            "upstream said",
            "ERROR 2026-11-30T12:34:56Z",
            "GET /v1/orders 401",
            "{'detail': 'unauthorized'}",
            "retry 3/5 after 1500 ms",
            "잠시 후 다시 시도",
        ]
    ),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 .:,-/()", max_size=30),
)
_SEPARATOR = st.sampled_from([" ", "\n", " | ", "\t", ": "])


@PROPERTY
@given(sample=secret_samples(), prefix=_CONTEXT, suffix=_CONTEXT, sep=_SEPARATOR)
def test_scrub_text_never_leaks_a_secret(
    sample: SecretSample, prefix: str, suffix: str, sep: str
) -> None:
    output = scrub_text(prefix + sep + sample.text + sep + suffix)
    assert not leaks(sample.value, output, context=context_of(sample, prefix, suffix)), (
        sample,
        output,
    )
    assert "[REDACTED" in output


@PROPERTY
@given(samples=st.lists(secret_samples(), min_size=2, max_size=6))
def test_many_secrets_in_one_message_all_go(samples: list[SecretSample]) -> None:
    output = scrub_text("\n".join(sample.text for sample in samples))
    context = "\n".join(context_of(sample) for sample in samples)
    for sample in samples:
        others = "\n".join(other.value for other in samples if other is not sample)
        assert not leaks(sample.value, output, context=context + others), (sample, output)


@PROPERTY
@given(sample=secret_samples())
def test_scrub_text_is_idempotent(sample: SecretSample) -> None:
    once = scrub_text(sample.text)
    assert scrub_text(once) == once


def _natural_evidence(sample: SecretSample) -> tuple[str, object]:
    value = sample.value
    return {
        "bearer": ("authorization", f"Bearer {value}"),
        "jwt": ("id_token", value),
        "api_key": ("api_key", value),
        "cookie": ("cookie", f"sid={value}"),
        "password": ("password", value),
        "url_userinfo": ("dsn", f"postgres://app:{value}@db:5432/app"),
        "email": ("email", value),
        "phone": ("phone", value),
        "user_id": ("user_id", value),
    }[sample.kind]


@PROPERTY
@given(sample=secret_samples())
def test_scrub_forwarded_keeps_every_key_and_never_leaks_a_secret(sample: SecretSample) -> None:
    key, natural_value = _natural_evidence(sample)
    fields: dict[str, object] = {
        key: natural_value,
        "query": sample.text,
        "span": {"note": f"failed: {sample.text}", "items": [sample.text, "lookup_order"]},
        "http_status": 401,
    }
    result = scrub_forwarded(fields)
    skeleton = [*fields, "note", "items", "span", "[REDACTED]"]
    context = context_of(sample, "failed: lookup_order", *skeleton)
    assert not evidence_leaks(sample.value, result, context), (sample, result)
    assert set(result) == set(fields)  # nothing dropped by name
    assert result["http_status"] == 401


@PROPERTY
@given(sample=secret_samples())
def test_scrub_evidence_never_leaks_a_secret(sample: SecretSample) -> None:
    key, natural_value = _natural_evidence(sample)
    evidence: dict[str, object] = {
        key: natural_value,
        "query": sample.text,
        "reason": f"failed: {sample.text}",
        "candidate_names": [sample.text, "lookup_order"],
        "trace_metadata": {
            "arguments_preview": sample.text,
            "trace_metadata": {"query": sample.text},
        },
        "raw_body": sample.text,
        "http_status": 401,
    }
    result = scrub_evidence(evidence)
    # The fixed key names and words around the secret may repeat part of it by chance.
    skeleton = [*evidence, f"{key}_present", f"{key}_hash", "dropped_keys", "arguments_preview"]
    context = context_of(sample, "failed: lookup_order", *skeleton)
    assert not evidence_leaks(sample.value, result, context), (sample, result)
    assert key not in result
    dropped = result["dropped_keys"]
    assert isinstance(dropped, list)
    assert "raw_body" in dropped
    assert result["http_status"] == 401


def test_every_secret_kind_is_generated() -> None:
    seen: set[str] = set()

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(sample=secret_samples())
    def collect(sample: SecretSample) -> None:
        seen.add(sample.kind)

    collect()
    assert seen == set(SECRET_KINDS)


@PROPERTY
@given(evidence=innocent_evidence())
def test_innocent_evidence_survives_unchanged(evidence: dict[str, object]) -> None:
    assert scrub_evidence(evidence) == evidence


# -- scrub_text: examples per pattern -----------------------------------------------------

_TOKEN = "AbCdEfGh1234567890ijklMNOPqrst"
_JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig123456_abcdef"


@pytest.mark.parametrize(
    ("text", "secret", "expected"),
    [
        # Authorization headers and schemes
        (f"Authorization: Bearer {_TOKEN}", _TOKEN, "Authorization: Bearer [REDACTED:token]"),
        (f"authorization: bearer {_TOKEN}", _TOKEN, "authorization: bearer [REDACTED:token]"),
        (f"Authorization: Token {_TOKEN}", _TOKEN, "Authorization: Token [REDACTED:token]"),
        (f"Authorization: {_TOKEN}", _TOKEN, "Authorization: [REDACTED:token]"),
        (
            '{"Authorization": "Basic dXNlcjpwYXNzd29yZA==", "Accept": "json"}',
            "dXNlcjpwYXNzd29yZA",
            '{"Authorization": "Basic [REDACTED:token]", "Accept": "json"}',
        ),
        (f"sent Bearer {_TOKEN} upstream", _TOKEN, "sent Bearer [REDACTED:token] upstream"),
        ("via Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNz", "via Basic [REDACTED:token]"),
        # JWT
        (f"jwt {_JWT} rejected", "eyJzdWIi", "jwt [REDACTED:jwt] rejected"),
        (f"Authorization: Bearer {_JWT}", "eyJzdWIi", "Authorization: Bearer [REDACTED:jwt]"),
        # API key shapes
        ("key sk-abcdefghijklmnopqrstuv1234", "abcdefghijklmnop", "key [REDACTED:api_key]"),
        ("sk-ant-api03-Abc123_def-456ghiJKL789mno", "Abc123_def", "[REDACTED:api_key]"),
        ("AKIAIOSFODNN7EXAMPLE in use", "IOSFODNN7", "[REDACTED:api_key] in use"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "abcdefghij", "[REDACTED:api_key]"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "11ABCDEFG", "[REDACTED:api_key]"),
        (
            "xoxb-123456789012-123456789012-AbCdEfGhIjKlMnOpQrStUvWx",
            "123456789012",
            "[REDACTED:api_key]",
        ),
        ("AIzaSyA1234567890abcdefghijklmnopqrstu", "SyA1234567890", "[REDACTED:api_key]"),
        ("sk_live_51Habcdefghij0123456789", "51Habcdefghij", "[REDACTED:api_key]"),
        ("pk_live_51Habcdefghij0123456789", "51Habcdefghij", "[REDACTED:api_key]"),
        ("rk_live_51Habcdefghij0123456789", "51Habcdefghij", "[REDACTED:api_key]"),
        # key=value forms
        ("password=hunter2!!", "hunter2", "password=[REDACTED:password]"),
        (
            '{"password": "correct horse battery", "user": "x"}',
            "correct horse",
            '{"password": "[REDACTED:password]", "user": "[REDACTED:user_id]"}',
        ),
        ("{'passwd': 'p4ssw0rd'}", "p4ssw0rd", "{'passwd': '[REDACTED:password]'}"),
        ("pwd = s3cr3t-value", "s3cr3t", "pwd = [REDACTED:password]"),
        ("x-api-key: abc123xyz789", "abc123xyz", "x-api-key: [REDACTED:api_key]"),
        ("X_API_KEY=abc123xyz789", "abc123xyz", "X_API_KEY=[REDACTED:api_key]"),
        ("apikey: abc123xyz789", "abc123xyz", "apikey: [REDACTED:api_key]"),
        (
            "GET /cb?access_token=qwerty12345&refresh_token=zxcvb67890&page=2",
            "qwerty12345",
            "GET /cb?access_token=[REDACTED:token]&refresh_token=[REDACTED:token]&page=2",
        ),
        ("id_token: abcdefgh12345", "abcdefgh12", "id_token: [REDACTED:token]"),
        ("token=abcdefgh12345", "abcdefgh12", "token=[REDACTED:token]"),
        ("client_secret=abcdefgh12345", "abcdefgh12", "client_secret=[REDACTED:secret]"),
        ("private_key: abcdefgh12345", "abcdefgh12", "private_key: [REDACTED:secret]"),
        ("session=abcdefgh12345", "abcdefgh12", "session=[REDACTED:session]"),
        ("sessionid=abcdefgh12345", "abcdefgh12", "sessionid=[REDACTED:session]"),
        ("sid=abcdefgh12345", "abcdefgh12", "sid=[REDACTED:session]"),
        ("auth: abcdefgh12345", "abcdefgh12", "auth: [REDACTED:token]"),
        ("credentials=abcdefgh12345", "abcdefgh12", "credentials=[REDACTED:secret]"),
        ("dbPassword=abcdefgh12345", "abcdefgh12", "dbPassword=[REDACTED:password]"),
        ('DB_PASSWORD="abcdefgh12345"', "abcdefgh12", 'DB_PASSWORD="[REDACTED:password]"'),
        ("--password abcdefgh12345", "abcdefgh12", "--password [REDACTED:password]"),
        ("'secret' => 'abcdefgh12345'", "abcdefgh12", "'secret' => '[REDACTED:secret]'"),
        (
            '{\\"token\\": \\"abcdefgh12345\\"}',
            "abcdefgh12",
            '{\\"token\\": \\"[REDACTED:token]\\"}',
        ),
        ("?code=abcdefgh12345&state=ok", "abcdefgh12", "?code=[REDACTED:secret]&state=ok"),
        # cookies
        (
            "Cookie: sid=abcdefgh12345; theme=dark\nnext",
            "abcdefgh12",
            "Cookie: [REDACTED:cookie]\nnext",
        ),
        ("Set-Cookie: a=abcdefgh12345; Path=/", "abcdefgh12", "Set-Cookie: [REDACTED:cookie]"),
        ("cookie=abcdefgh12345", "abcdefgh12", "cookie=[REDACTED:cookie]"),
        # URL user-info
        (
            "postgres://admin:s3cr3tpass@db:5432/app",
            "s3cr3tpass",
            "postgres://[REDACTED]@db:5432/app",
        ),
        ("redis://:s3cr3tpass@cache:6379", "s3cr3tpass", "redis://[REDACTED]@cache:6379"),
        ("https://bob:s3cr3tpass@example.com/x", "s3cr3tpass", "https://[REDACTED]@example.com/x"),
        # e-mail
        (
            "lookup failed for kim.lee+x@mail.example.co.kr.",
            "kim.lee",
            "lookup failed for [REDACTED:email].",
        ),
        ("From: <a@b.example>", "a@b.example", "From: <[REDACTED:email]>"),
        # phones
        ("call +1 (555) 123-4567 now", "555) 123", "call [REDACTED:phone] now"),
        ("call +82 10-1234-5678", "1234-5678", "call [REDACTED:phone]"),
        ("call +821012345678", "1012345678", "call [REDACTED:phone]"),
        ("call +44 20 7946 0958", "20 7946 0958", "call [REDACTED:phone]"),
        ("010-1234-5678", "1234-5678", "[REDACTED:phone]"),
        ("01012345678", "01012345678", "[REDACTED:phone]"),
        ("010 1234 5678", "1234 5678", "[REDACTED:phone]"),
        ("(555) 123-4567", "123-4567", "[REDACTED:phone]"),
        ("555-123-4567", "123-4567", "[REDACTED:phone]"),
        ("555.123.4567", "123.4567", "[REDACTED:phone]"),
        # identities in key=value form
        ("user_id=u-12345678", "u-12345678", "user_id=[REDACTED:user_id]"),
        ('{"userId": "u-12345678"}', "u-12345678", '{"userId": "[REDACTED:user_id]"}'),
        ("uid=12345678", "12345678", "uid=[REDACTED:user_id]"),
        ("user: kimchi99", "kimchi99", "user: [REDACTED:user_id]"),
        ("username=kimchi99", "kimchi99", "username=[REDACTED:user_id]"),
        ("customer_id: cus_ABCDEFGH", "cus_ABCDEFGH", "customer_id: [REDACTED:user_id]"),
        ("account_id=acct-12345678", "acct-12345678", "account_id=[REDACTED:user_id]"),
        ("member_id=m-12345678", "m-12345678", "member_id=[REDACTED:user_id]"),
        ("email=kimchi99", "kimchi99", "email=[REDACTED:email]"),
        ("phone: kimchi99", "kimchi99", "phone: [REDACTED:phone]"),
        # long high-entropy tokens
        (
            "key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY used",
            "wJalrXUtnFEMI",
            "key [REDACTED:secret] used",
        ),
        ("digest 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b", "9f86d081", "digest [REDACTED:secret]"),
        # PEM blocks
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc123\n-----END RSA PRIVATE KEY-----",
            "MIIEabc123",
            "[REDACTED:private_key]",
        ),
    ],
)
def test_scrub_text_examples(text: str, secret: str, expected: str) -> None:
    output = scrub_text(text)
    assert output == expected
    assert secret not in output


@pytest.mark.parametrize(
    "text",
    [
        "on 2026-11-30 at 12:34:56",
        "2026-11-30T12:34:56.789+09:00",
        "HTTP 503 from upstream; status=429",
        "listening on localhost:8080 and 10.0.0.12:5432",
        "3 of 12 items, 1500 ms, retry 2/5",
        "version 1.2.24, graph_version=2026.11.30",
        "input_tokens=1234 output_tokens=98765 max_tokens=4096",
        "session_id_hash=ab12cd34ef56ab78 user_id_hash=0123456789abcdef",
        "task 550e8400-e29b-41d4-a716-446655440000 finished",
        "/home/runner/work/project123/src/llamon_agent/core/scrub.py line 42",
        "Bearer token expired; Basic auth failed",
        "token_count=5 auth_readiness=ready password_required=true",
        "field customerAddressLine missing in orders.items.0.productCode",
        "ValueError: expected 3 segments, got 2",
        "Internal error (incident 1a2b3c4d5e6f).",
        "call_tool(search_orders) returned 0 results for 'pending'",
        "잠시 후 다시 시도해 주세요",
    ],
)
def test_innocent_text_is_left_alone(text: str) -> None:
    assert scrub_text(text) == text


def test_a_uuid_under_a_secret_key_is_still_redacted() -> None:
    uuid = "550e8400-e29b-41d4-a716-446655440000"
    assert scrub_text(f"session_id={uuid}") == "session_id=[REDACTED:session]"
    assert scrub_text(f"api_key: {uuid}") == "api_key: [REDACTED:api_key]"


def test_replacement_names_the_kind() -> None:
    output = scrub_text(
        f"Bearer {_TOKEN} {_JWT} a@b.example +14155552671 password=hunter22 user_id=u-1234"
    )
    for kind in ("token", "jwt", "email", "phone", "password", "user_id"):
        assert f"[REDACTED:{kind}]" in output


def test_truncation_appends_a_marker() -> None:
    assert scrub_text("a" * 3000) == "a" * 2000 + "…[truncated]"
    assert scrub_text("hello world", max_length=5) == "hello…[truncated]"
    assert scrub_text("hello", max_length=5) == "hello"
    assert scrub_text("hello", max_length=-3) == "…[truncated]"


def test_truncation_happens_after_scrubbing() -> None:
    text = f"password={_TOKEN}"
    assert scrub_text(text, max_length=20) == "password=[REDACTED:p…[truncated]"


def test_huge_input_never_shows_a_secret_split_at_the_cut() -> None:
    # Inputs far past max_length are cut before scanning.  The PEM block shrinks to a marker,
    # so the text near that cut becomes visible: a token split by the cut (too short to
    # look random any more) must not show up.
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    cut = 2000 * 4 + 1024
    header, footer = "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY----- "
    block = header + "A" * (cut - 20 - len(header) - len(footer)) + footer
    text = block + secret + " tail"
    assert len(block) < cut < len(block) + len(secret)
    output = scrub_text(text)
    assert not leaks(secret, output)
    assert output == "[REDACTED:private_key] …[truncated]"


def test_scrub_text_never_raises() -> None:
    class Hostile:
        def __str__(self) -> str:
            raise RuntimeError("password=hunter22")

    assert scrub_text(Hostile()) == "[REDACTED:scrub_failed]"  # type: ignore[arg-type]
    assert scrub_text(12345) == "12345"  # type: ignore[arg-type]
    assert scrub_text("") == ""


def test_scrub_text_is_fast_even_on_hostile_input() -> None:
    inputs = [
        "eyJ" * 3000,
        "a@" * 4000,
        "a." * 4000 + "@",
        "Ab1" * 3000,
        "+1" * 4000,
        "password=" * 1000,
        "x://" * 2000,
        "-----BEGIN PRIVATE KEY-----" * 300,
        "Bearer " * 1200,
        ("INFO request 42 completed in 15 ms for tool lookup_order status=200 " * 30)[:2000],
    ]
    start = time.perf_counter()
    for text in inputs:
        scrub_text(text, max_length=2000)
    for _ in range(200):
        scrub_text(inputs[-1])
    assert time.perf_counter() - start < 3.0


# -- scrub_evidence ------------------------------------------------------------------------


def test_the_documented_example() -> None:
    evidence = {
        "input_tokens": 10,
        "session_id_hash": "ab12",
        "Authorization": "Bearer xyz",
        "user_id": "u-123",
        "field_name": "orderNo",
        "email": "a@b.co",
        "raw_body": "...",
    }
    assert scrub_evidence(evidence) == {
        "input_tokens": 10,
        "session_id_hash": "ab12",
        "Authorization_present": True,
        "user_id_hash": keyed_hash("u-123"),
        "field_name": "orderNo",
        "email_hash": keyed_hash("a@b.co"),
        "dropped_keys": ["raw_body"],
    }


@pytest.mark.parametrize(
    "key",
    [
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "api_key",
        "apikey",
        "X-Api-Key",
        "password",
        "passwd",
        "secret",
        "client_secret",
        "Cookie",
        "Set-Cookie",
        "authorization",
        "auth",
        "bearer",
        "jwt",
        "credential",
        "credentials",
        "private_key",
        "github_token",
        "webhook_secret",
        "db_password",
        "openai_api_key",
        "accessToken",
        "db.password",
        "verification_code",
    ],
)
def test_credential_keys_become_presence_flags(key: str) -> None:
    assert scrub_evidence({key: "s3cr3t-value-123"}) == {f"{key}_present": True}
    assert scrub_evidence({key: ""}) == {f"{key}_present": False}


@pytest.mark.parametrize(
    "key",
    [
        "user_id",
        "userid",
        "userId",
        "uid",
        "user",
        "username",
        "email",
        "e_mail",
        "phone",
        "phone_number",
        "mobile",
        "session_id",
        "sessionid",
        "customer_id",
        "account_id",
        "member_id",
        "ip",
        "ip_address",
    ],
)
def test_identity_keys_become_keyed_hashes(key: str) -> None:
    result = scrub_evidence({key: "kim@example.com"})
    assert result == {f"{key}_hash": keyed_hash("kim@example.com")}
    assert HEX16.fullmatch(str(result[f"{key}_hash"]))
    assert scrub_evidence({key: None}) == {f"{key}_hash": None}
    assert scrub_evidence({key: 12345}) == {f"{key}_hash": keyed_hash("12345")}


def test_plural_credential_words_are_counts_unless_they_hold_text() -> None:
    assert scrub_evidence({"input_tokens": 5, "cached_tokens": 0}) == {
        "input_tokens": 5,
        "cached_tokens": 0,
    }
    assert scrub_evidence({"refresh_tokens": ["abcdefgh12345"]}) == {"refresh_tokens_present": True}


def test_allowed_suffixes_are_kept() -> None:
    evidence = {
        "api_key_present": False,
        "email_hash": "0123456789abcdef",
        "retry_count": 2,
        "latency_ms": 12.5,
        "wait_s": 1,
        "wait_seconds": 1,
        "prompt_tokens": 10,
        "tool_names": ["a", "b"],
        "upstream_status": "ok",
        "grpc_code": 14,
        "schema_version": "1.2.24",
        "node_kind": "tool",
        "content_type": "application/json",
        "page_index": 0,
        "skip_reason": "cached",
        "debug_flag": False,
        "cache_enabled": True,
        "auth_required": True,
        "page_size": 50,
        "rate_limit": 100,
    }
    assert scrub_evidence(evidence) == evidence


def test_dropped_keys_are_named_sorted_and_unique() -> None:
    result = scrub_evidence(
        {
            "zeta": 1,
            "raw_body": "x",
            "alpha": 2,
            "kim@example.com": "key is an e-mail",
            "1starts_with_digit": 1,
            "has space": 1,
            "x" * 65: 1,
            42: "not a string key",  # type: ignore[dict-item]
            "http_status": 500,
        }
    )
    assert result == {"http_status": 500, "dropped_keys": ["alpha", "raw_body", "zeta"]}


def test_a_key_name_that_is_a_secret_is_dropped_without_showing_it() -> None:
    secret_key = "sk-abcdefghijklmnopqrstuvwxyz_count"
    result = scrub_evidence({secret_key: 3, "user_01012345678_size": 1})
    assert not evidence_leaks("abcdefghijklmnopqrstuvwxyz", result)
    assert not evidence_leaks("01012345678", result)
    assert set(result) == {"dropped_keys"}
    dropped = result["dropped_keys"]
    assert isinstance(dropped, list)
    assert len(dropped) == 2


def test_values_of_allowed_keys_follow_the_value_policy() -> None:
    class Secretive:
        def __repr__(self) -> str:
            return "Secretive(password='hunter22')"

    class Colour(enum.Enum):
        RED = "sk-abcdefghijklmnopqrstuvwxyz"

    class Level(enum.IntEnum):
        HIGH = 3

    result = scrub_evidence(
        {
            "query": "orders of kim@example.com",
            "count": True,
            "size": Level.HIGH,
            "score": 0.5,
            "filter": None,
            "fields": ("a", "b"),
            "scores": {3, 1, 2},
            "candidate_names": [f"tool_{i}" for i in range(60)],
            "tied_candidates": [b"abc", bytearray(b"abcd")],
            "reason": Secretive(),
            "stage": Colour.RED,
            "status": dt.datetime(2026, 11, 30, 12, 34, 56),
        }
    )
    assert result["query"] == "orders of [REDACTED:email]"
    assert result["count"] is True
    assert result["size"] == 3
    assert type(result["size"]) is int
    assert result["score"] == 0.5
    assert result["filter"] is None
    assert result["fields"] == ["a", "b"]
    assert result["scores"] == [1, 2, 3]
    assert result["candidate_names"] == [f"tool_{i}" for i in range(50)]
    assert result["tied_candidates"] == ["[bytes:3]", "[bytes:4]"]
    assert result["reason"] == "Secretive"
    assert result["stage"] == "Colour.RED"
    assert result["status"] == "2026-11-30T12:34:56"


def test_long_strings_are_cut_at_500() -> None:
    result = scrub_evidence({"query": "q" * 600})
    assert result["query"] == "q" * 500 + "…[truncated]"


def test_nested_mappings_use_the_same_policy() -> None:
    result = scrub_evidence(
        {
            "trace_metadata": {
                "password": "hunter22",
                "node_id": "n1",
                "junk": 1,
                "rank_signals": {"user_id": "u-1", "score": 0.9},
            }
        }
    )
    assert result == {
        "trace_metadata": {
            "password_present": True,
            "node_id": "n1",
            "rank_signals": {"user_id_hash": keyed_hash("u-1"), "score": 0.9},
            "dropped_keys": ["junk"],
        }
    }


def _nest(levels: int) -> dict[str, object]:
    evidence: dict[str, object] = {"count": 1}
    for _ in range(levels):
        evidence = {"trace_metadata": evidence}
    return evidence


def test_nesting_deeper_than_five_levels_is_cut() -> None:
    assert scrub_evidence(_nest(5)) == _nest(5)
    deep: object = scrub_evidence(_nest(7))
    for _ in range(5):
        assert isinstance(deep, dict)
        deep = deep["trace_metadata"]
    assert deep == {"trace_metadata": "[depth-limit]"}


def test_self_referencing_structures_do_not_blow_up() -> None:
    looped: dict[str, object] = {"count": 1}
    looped["trace_metadata"] = looped
    listed: list[object] = [1]
    listed.append(listed)
    result = scrub_evidence({"trace_metadata": looped, "fields": listed})
    assert result["fields"] == [1, [1, [1, [1, [1, "[depth-limit]"]]]]]
    assert "[depth-limit]" in repr(result["trace_metadata"])


def test_scrub_evidence_never_raises() -> None:
    class BrokenMapping(Mapping[str, object]):
        def __getitem__(self, key: str) -> object:
            raise RuntimeError("password=hunter22")

        def __iter__(self) -> Iterator[str]:
            return iter(["query"])

        def __len__(self) -> int:
            return 1

    class BadBool:
        def __bool__(self) -> bool:
            raise RuntimeError("boom")

    assert scrub_evidence(BrokenMapping()) == {"scrub_failed": True}
    assert scrub_evidence({"trace_metadata": BrokenMapping()}) == {"scrub_failed": True}
    assert scrub_evidence(["not", "a", "mapping"]) == {"scrub_failed": True}  # type: ignore[arg-type]
    assert scrub_evidence(None) == {}
    assert scrub_evidence({}) == {}
    assert scrub_evidence({"token": BadBool()}) == {"token_present": True}


def test_scrub_value_directly() -> None:
    assert scrub_value("password=hunter22") == "password=[REDACTED:password]"
    assert scrub_value(7) == 7
    assert scrub_value({"password": "x", "top_k": 3}) == {"password_present": True, "top_k": 3}
    assert scrub_value(object()) == "object"


# -- allow_evidence_keys -----------------------------------------------------------------


@pytest.mark.usefixtures("restore_scrub_state")
def test_allow_evidence_keys_extends_the_allow_list() -> None:
    evidence = {"region": "eu", "shard-Region": "eu-2", "tenantTier": "gold"}
    assert scrub_evidence(evidence) == {"dropped_keys": ["region", "shard-Region", "tenantTier"]}
    allow_evidence_keys("region", "tenant_tier", suffixes=["_region"])
    assert scrub_evidence(evidence) == evidence


@pytest.mark.usefixtures("restore_scrub_state")
def test_allowing_a_credential_or_identity_key_changes_nothing() -> None:
    allow_evidence_keys("password", "email")
    assert scrub_evidence({"password": "x", "email": "a@b.co"}) == {
        "password_present": True,
        "email_hash": keyed_hash("a@b.co"),
    }


@pytest.mark.usefixtures("restore_scrub_state")
@pytest.mark.parametrize(
    ("keys", "suffixes"), [(("bad key",), ()), (("ok",), ("",)), (("a@b",), ())]
)
def test_allow_evidence_keys_rejects_bad_names(
    keys: tuple[str, ...], suffixes: tuple[str, ...]
) -> None:
    before = (scrub._allowed_keys, scrub._allowed_suffixes)
    with pytest.raises(ValueError, match="evidence key"):
        allow_evidence_keys(*keys, suffixes=suffixes)
    assert (scrub._allowed_keys, scrub._allowed_suffixes) == before


def test_the_allow_list_is_back_to_default_after_the_extension_tests() -> None:
    assert scrub_evidence({"region": "eu"}) == {"dropped_keys": ["region"]}


# -- keyed_hash / set_hash_key -----------------------------------------------------------


def test_keyed_hash_is_16_hex_and_stable() -> None:
    first = keyed_hash("u-12345678")
    assert HEX16.fullmatch(first)
    assert keyed_hash("u-12345678") == first
    assert keyed_hash("u-12345679") != first
    assert "12345678" not in first


@pytest.mark.usefixtures("restore_scrub_state")
def test_set_hash_key_makes_hashes_reproducible() -> None:
    expected = hmac.new(b"k3y", b"u-1", hashlib.sha256).hexdigest()[:16]
    set_hash_key("k3y")
    assert keyed_hash("u-1") == expected
    set_hash_key(b"k3y")
    assert keyed_hash("u-1") == expected
    set_hash_key(b"other")
    assert keyed_hash("u-1") != expected


@pytest.mark.usefixtures("restore_scrub_state")
def test_set_hash_key_none_installs_a_fresh_random_key() -> None:
    set_hash_key("k3y")
    fixed = keyed_hash("u-1")
    set_hash_key(None)
    first_random = keyed_hash("u-1")
    set_hash_key(None)
    assert first_random != fixed
    assert keyed_hash("u-1") != first_random
    with pytest.raises(ValueError, match="empty"):
        set_hash_key("")


@pytest.mark.usefixtures("restore_scrub_state")
def test_the_environment_key_is_read_at_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLAMON_SCRUB_KEY", "from-env")
    monkeypatch.setattr(scrub, "_hash_key", None)
    expected = hmac.new(b"from-env", b"kim", hashlib.sha256).hexdigest()[:16]
    assert keyed_hash("kim") == expected
    monkeypatch.setenv("LLAMON_SCRUB_KEY", "changed-later")
    assert keyed_hash("kim") == expected  # read once, then fixed for the process


@pytest.mark.usefixtures("restore_scrub_state")
def test_without_an_environment_key_a_random_one_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLAMON_SCRUB_KEY", raising=False)
    monkeypatch.setattr(scrub, "_hash_key", None)
    first = keyed_hash("kim")
    assert keyed_hash("kim") == first
    monkeypatch.setattr(scrub, "_hash_key", None)
    assert keyed_hash("kim") != first


def test_scrub_evidence_is_idempotent_with_dropped_keys() -> None:
    once = scrub_evidence({"field_name": "a", "raw_body": "x"})
    assert once == {"field_name": "a", "dropped_keys": ["raw_body"]}
    assert scrub_evidence(once) == once
    assert scrub_evidence({**once, "other_blob": 1}) == {
        "field_name": "a",
        "dropped_keys": ["other_blob", "raw_body"],
    }


# --- upstream locations: removed from client-visible text only ----------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "OpenAI API answered HTTP 429 to POST https://llm-gw.corp:8443/v1/chat (request id r1)",
            "OpenAI API answered HTTP 429 to POST [REDACTED:url] (request id r1)",
        ),
        ("see (http://a.b/c?d=1).", "see ([REDACTED:url])."),
        ("redis://user:pw@cache.internal:6379/0 refused", "[REDACTED:url] refused"),
        ("connect to db.internal:5432 failed", "connect to [REDACTED:host] failed"),
        ("peer 10.0.0.12 reset", "peer [REDACTED:host] reset"),
        ("localhost:8080 and [::1]:9000", "[REDACTED:host] and [REDACTED:host]"),
        ("HTTP 503 at 12:30, version 1.2.3, 3.5 s", "HTTP 503 at 12:30, version 1.2.3, 3.5 s"),
    ],
)
def test_strip_locations(text: str, expected: str) -> None:
    assert scrub.strip_locations(text) == expected


def test_scrub_log_text_strips_locations_and_keeps_a_tracebacks_source_lines() -> None:
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/handlers.py", line 12, in handle\n'
        "    return await self.app(scope, 'http://10.0.0.1:80/x')\n"
        "                 ^^^^^^^^\n"
        "RuntimeError: connect to postgresql://app:pw@db.internal:5432/orders failed\n"
        "    host=db.prod.internal\n"
        "see api.example.com"
    )
    assert scrub.scrub_log_text(trace).split("\n") == [
        "Traceback (most recent call last):",
        '  File "/srv/app/handlers.py", line 12, in handle',
        "    return await self.app(scope, '[REDACTED:url]')",
        "                 ^^^^^^^^",
        "RuntimeError: connect to [REDACTED:url] failed",
        "    host=[REDACTED:host]",
        "see [REDACTED:host]",
    ]
    one_line = "pool at db.prod.internal:5432 for alice@example.com"
    assert scrub.scrub_log_text(one_line) == "pool at [REDACTED:host] for [REDACTED:email]"
    assert scrub.scrub_log_text(one_line) == scrub.scrub_public_text(one_line)


def test_scrub_public_text_strips_and_scrubs_but_scrub_text_keeps_locations() -> None:
    text = "token=abcdefgh12345678 at https://api.internal/v1"
    assert scrub.scrub_public_text(text) == "token=[REDACTED:token] at [REDACTED:url]"
    assert "https://api.internal/v1" in scrub.scrub_text(text)


@pytest.mark.parametrize("hostile", ["a." * 50_000, "1." * 50_000, ("a" * 61 + ".") * 2_000])
def test_strip_locations_is_fast_on_hostile_input(hostile: str) -> None:
    started = time.perf_counter()
    scrub.strip_locations(hostile)
    assert time.perf_counter() - started < 2.0


# --- encoded secrets: percent-encoding, JSON escapes, base64; private keys as one block ------


@pytest.mark.parametrize(
    ("text", "secret", "expected"),
    [
        ("GET /search?q=alice%40corp.com&page=2", "alice", "GET /search?q=[REDACTED:email]&page=2"),
        (
            "redirect_uri=https%3A%2F%2Fbob%3APW-77aa%40idp.example%2Fcb",
            "PW-77aa",
            "redirect_uri=https://[REDACTED]@idp.example/cb",
        ),
        (
            "body: password%3Dhunter22%26next%3D1",
            "hunter22",
            "body: password=[REDACTED:password]",
        ),
        ("double: q=carol%2540corp.com", "carol", "double: q=[REDACTED:email]"),
        ('{"msg": "mail alice\\u0040corp.com"}', "alice", '{"msg": "mail [REDACTED:email]"}'),
        (
            "dsn https:\\/\\/bob:Pw-998877@db.example\\/x",
            "Pw-998877",
            "dsn https://[REDACTED]@db.example/x",
        ),
        (
            "blob cGFzc3dvcmQ9aHVudGVyMjI= sent",
            "cGFzc3dvcmQ9aHVudGVyMjI",
            "blob [REDACTED:secret] sent",
        ),
        ("blob YWxpY2VAY29ycC5jb20 sent", "YWxpY2VAY29ycC5jb20", "blob [REDACTED:secret] sent"),
    ],
)
def test_encoded_secrets_are_decoded_before_matching(text: str, secret: str, expected: str) -> None:
    output = scrub_text(text)
    assert output == expected
    assert secret not in output


def test_encoded_text_without_a_secret_keeps_its_encoding() -> None:
    for text in ("GET /a%20b?x=1%2C2", 'path "C:\\\\tmp\\\\x"', "id SGVsbG8gV29ybGQh"):
        assert scrub_text(text) == text


def _pem(label: str) -> str:
    body = "\n".join(["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" + "x" * 12] * 3)
    return f"-----BEGIN {label}-----\n{body}\n=Ab9c\n-----END {label}-----"


@pytest.mark.parametrize(
    "text",
    [
        _pem("RSA PRIVATE KEY"),
        _pem("PGP PRIVATE KEY BLOCK"),
        _pem("OPENSSH PRIVATE KEY").replace("\n", "\\n"),
        urllib.parse.quote(_pem("PRIVATE KEY")),
        json.dumps({"key": _pem("EC PRIVATE KEY")}),
        # the tail of a block whose BEGIN line is not in this text
        _pem("PRIVATE KEY").split("\n", 2)[2],
    ],
)
def test_a_private_key_block_is_redacted_as_one(text: str) -> None:
    output = scrub_text(f"loaded {text} from vault")
    assert "[REDACTED:private_key]" in output
    for piece in ("MIIEvQIB", "=Ab9c", "xxxxxxxx", "BgkqhkiG"):
        assert piece not in output, output
    assert output.startswith("loaded ")


# --- card numbers and credentials in prose ----------------------------------------------


@pytest.mark.parametrize(
    "card",
    [
        "4111111111111111",
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "5500 0000 0000 0004",
        "3400 000000 00009",
        "6011000990139424",
        "4222222222222",
        "2221000000000009",
        "6221260000000000001",
    ],
)
def test_card_numbers_are_redacted(card: str) -> None:
    assert scrub_text(f"charge card {card} declined") == "charge card [REDACTED:card] declined"


@pytest.mark.parametrize(
    "text",
    [
        "order 4111111111111112 shipped",  # fails the Luhn check
        "order id 5500-0000-0000-0005",
        "ts 1732960000000 and 1732960000123456789",  # epoch ms / ns
        "ISBN 978-0-306-40615-7 and 9780306406157",
        "task 550e8400-e29b-41d4-a716-446655440000",
        "trace 41110000-1111-1111-1111-111111111111",
        "re order 4111-1111-111",
        "amount 4111.11 and build 5.500.000.000.000.004",
        "order no 6011-0009-9013-9425",
    ],
)
def test_numbers_that_are_not_cards_survive(text: str) -> None:
    assert scrub_text(text) == text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("the password is Tr0ub4dor&3", "Tr0ub4dor"),
        ("Password was 'correct horse battery'", "correct horse"),
        ("my pwd: hunter2x", "hunter2x"),
        ("secret=s3cr3t-value", "s3cr3t-value"),
        ("the api key is ak_live_998877", "ak_live_998877"),
        ("PIN is 4821", "4821"),
        ("Das Passwort ist Geheim123!", "Geheim123"),
        ("Kennwort lautet Sommer2026", "Sommer2026"),
        ("le mot de passe est Soleil99", "Soleil99"),
        ("mot de passe : Soleil99", "Soleil99"),
        ("la contraseña es Luna-2026", "Luna-2026"),
        ("contraseña: Luna-2026", "Luna-2026"),
        ("비밀번호는 qwer1234입니다", "qwer1234"),
        ("비밀번호: qwer1234", "qwer1234"),
        ("パスワードは sakura77 です", "sakura77"),
        ("パスワード：sakura77", "sakura77"),
    ],
)
def test_credentials_in_prose_are_redacted(text: str, secret: str) -> None:
    output = scrub_text(text)
    assert secret not in output, output
    assert "[REDACTED:" in output


@pytest.mark.parametrize(
    "text",
    [
        "password is required",
        "the password is incorrect.",
        "Password was reset; token is expired",
        "secret is missing from the vault config",
        "Das Passwort ist falsch",
        "le mot de passe est invalide",
        "la contraseña es incorrecta",
        "password_required=true",
    ],
)
def test_ordinary_sentences_about_passwords_survive(text: str) -> None:
    assert scrub_text(text) == text


# --- locations in client-visible text ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Connect call failed ('127.0.0.1', 55432)", "Connect call failed [REDACTED:host]"),
        (
            "Cannot assign requested address ('::1', 55432, 0, 0)",
            "Cannot assign requested address [REDACTED:host]",
        ),
        (
            'could not translate host name "db-primary" to address',
            'could not translate host name "[REDACTED:host]" to address',
        ),
        (
            'connection to server at "pg.prod.internal" (10.1.2.3), port 5432 failed',
            'connection to server at "[REDACTED:host]" ([REDACTED:host]), port '
            "[REDACTED:port] failed",
        ),
        ("host=pg1 port=5433 dbname=app", "host=[REDACTED:host] port=[REDACTED:port] dbname=app"),
        ("resolving api.openai.com failed", "resolving [REDACTED:host] failed"),
        ("server responded 500; see scrub.py and a2a.server.apps", None),
    ],
)
def test_strip_locations_removes_backend_addresses(text: str, expected: str | None) -> None:
    assert scrub.strip_locations(text) == (text if expected is None else expected)


@PROPERTY
@given(value=st.uuids(), upper=st.booleans())
def test_a_bare_uuid_is_kept_as_the_full_scrub_keeps_it(value: uuid.UUID, upper: bool) -> None:
    from llamon_agent.core.scrub import _scrub_full

    text = str(value).upper() if upper else str(value)
    assert scrub_text(text) == text
    assert _scrub_full(text) == text  # the fast path answers what the full scrub would
    assert scrub_evidence({"password": text}) != {"password": text}  # a key still redacts


@PROPERTY
@given(value=st.text(alphabet="0123456789abcdef", min_size=12, max_size=12))
def test_a_bare_incident_id_is_kept_as_the_full_scrub_keeps_it(value: str) -> None:
    from llamon_agent.core.scrub import _scrub_full

    assert scrub_text(value) == value
    assert _scrub_full(value) == value  # the fast path answers what the full scrub would
    assert scrub_evidence({"incident_id": value}) == {"incident_id": value}
    assert scrub_evidence({"password": value}) == {"password_present": True}


@pytest.mark.parametrize(
    "value", ["000000000000", "123456789012", "010123456789", "aaaaaaaaaaaa", "abcdef012345"]
)
def test_incident_id_shaped_texts_are_kept_as_the_full_scrub_keeps_them(value: str) -> None:
    from llamon_agent.core.scrub import _scrub_full

    assert scrub_text(value) == _scrub_full(value) == value
    assert scrub_text(value, max_length=5) == value[:5] + "…[truncated]"  # the limit holds


def test_only_a_bare_lowercase_incident_id_skips_the_scan() -> None:
    text = "password is 0123456789ab"
    assert scrub_text(text) != text  # inside a text, the id is scanned with it
    assert scrub_text("0123456789AB") == "0123456789AB"  # (upper case: scanned, kept)


@pytest.mark.parametrize(
    "token",
    [
        "1P+Tt/6_DOA~Qq+rYKede0Uf_76_L+ZZQG-kctOiUghXPBr2DKRaC",
        "6JgkIuZQ-Yu2L-sGMrfuEhIfir3~+drT/IR.9++z-LgVYDC7B6o",
        "vBA7C/x7G9CYcbpwgDOOn18rfITA+R.rKLcU.dDDg++Lx-L~iypxaPq_sgz",
    ],
)
def test_a_bearer_token_with_plus_and_slash_in_a_query_leaves_nothing(token: str) -> None:
    """In a form-encoded query "+" is a space and the token's own "+" is "%2B": decoding
    must not turn the token's "+" into spaces, and what follows a token's marker up to
    the end of its word is the same token."""
    request = httpx.Request(
        "GET", "https://api.example/v1/items", params={"q": f"rejected Bearer {token} with 401"}
    )
    scrubbed = scrub.scrub_public_text(f"Client error for url '{request.url}'")
    assert not reveals(token, scrubbed), scrubbed
    assert scrubbed.endswith("'")  # the quote after the URL is kept


@pytest.mark.parametrize(
    "url",
    [
        "postgres://:00000000+%00@db.internal:1/app",
        "postgres://app:s3cr+t%21pw@db.internal:5432/orders",
        "redis://:pa+ss%2Fword@cache:6379/0",
    ],
)
def test_a_password_with_plus_and_percent_in_a_url_is_redacted_whole(url: str) -> None:
    """In a URL's user-info "+" is the character itself, not a form-encoded space: the
    user-info stays one piece to redact (it was cut at the "+", and what came after it was
    taken for an e-mail address, leaving the start of the password)."""
    password = url.split("://", 1)[1].rsplit("@", 1)[0].split(":", 1)[1]
    scrubbed = scrub_text(url)
    assert "[REDACTED]@" in scrubbed, scrubbed
    assert password.split("+")[0] not in scrubbed, scrubbed
    evidence = json.dumps(scrub.scrub_evidence({"query": url}))
    assert evidence == '{"query": "[REDACTED:url]"}'  # evidence keeps no location either


def test_the_unmapped_failure_message_is_kept_without_a_scan() -> None:
    message = incident_message("1a2b3c4d5e6f")
    assert message == "Internal error (incident 1a2b3c4d5e6f)."
    scanned = _scrub_cached.cache_info()
    located = _strip_locations_cached.cache_info()
    assert scrub_text(message) == message
    assert strip_locations(message) == message
    assert scrub_public_text(message) == message
    assert _scrub_cached.cache_info() == scanned  # neither scanned nor looked up
    assert _strip_locations_cached.cache_info() == located


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Internal error (incident 1a2b3c4d5e6f). password=hunter22",
            "Internal error (incident 1a2b3c4d5e6f). password=[REDACTED:password]",
        ),
        (
            "Internal error (incident db.internal:5432).",
            "Internal error (incident [REDACTED:host]).",
        ),
    ],
)
def test_text_that_only_resembles_it_is_scrubbed_as_usual(text: str, expected: str) -> None:
    assert scrub_public_text(text) == expected
