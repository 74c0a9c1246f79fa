"""Wire names, value conventions, the never-raising fallback, parts and guardrail builders."""

from __future__ import annotations

import logging

import pytest
from a2a.types import DataPart, Part, TextPart

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.error_data import (
    ApplicationErrorData,
    ErrorFlow,
    ErrorNode,
    ProtocolErrorData,
    application_error_to_parts,
    build_guardrail_application_error,
    build_guardrail_extras,
    make_application_error_data,
    make_protocol_error_data,
    normalize_extras,
)
from tests._support.parts import text_of

FALLBACK = (ErrorCode.INTERNAL_ERROR, "error_data_build_failed", False)


def _triple(data: ApplicationErrorData | ProtocolErrorData) -> tuple[ErrorCode, str, bool]:
    return (data.error_code, data.error_reason, data.retriable)


def test_wire_names_are_camel_case() -> None:
    data = make_application_error_data(
        ErrorCode.RATE_LIMITED,
        "classifier_quota_exceeded",
        "quota",
        retriable=True,
        retryAfterMs=60_000,
        errorSource="mcp:MCP-001/check_account_owner",
        domain="subject-management",
        domainCode="DOC_005",
        retried=2,
        node={"id": "rag_search", "kind": "business"},
        flow={"completedNodes": ["fetch_subject"]},
    )
    assert data.to_wire() == {
        "errorCode": "RATE_LIMITED",
        "errorReason": "classifier_quota_exceeded",
        "errorMessage": "quota",
        "retriable": True,
        "retried": 2,
        "retryAfterMs": 60_000,
        "errorSource": "mcp:MCP-001/check_account_owner",
        "domain": "subject-management",
        "domainCode": "DOC_005",
        "node": {"id": "rag_search", "kind": "business"},
        "flow": {"completedNodes": ["fetch_subject"]},
    }


def test_python_names_are_accepted_too() -> None:
    data = make_application_error_data(
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "x",
        retry_after_ms=5,
        node=ErrorNode(id="a", kind="llm"),
        flow=ErrorFlow(completed_nodes=["s"]),
    )
    assert data.retry_after_ms == 5
    assert data.to_wire()["flow"] == {"completedNodes": ["s"]}


def test_round_trip_from_wire_ignores_unknown_keys() -> None:
    wire = {"errorCode": "NOT_FOUND", "errorReason": "gone", "futureField": 1}
    data = ApplicationErrorData.model_validate(wire)
    assert data.error_code is ErrorCode.NOT_FOUND
    assert "futureField" not in data.to_wire()


@pytest.mark.parametrize(
    "source",
    [
        "mcp:a",
        "rag:idx/1",
        "llm:gpt",
        "db:orders",
        "http:api",
        "validator:x",
        "guardrail:pii",
        "internal:loop",
    ],
)
def test_error_source_accepts_each_system(source: str) -> None:
    assert (
        make_application_error_data(ErrorCode.INTERNAL_ERROR, "r", errorSource=source).error_source
        == source
    )


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("http:api.internal.example.com/users", "http:[REDACTED:host]/users"),
        ("db:orders@10.0.0.5:5432", "db:orders@[REDACTED:host]"),
    ],
)
def test_error_source_never_shows_a_host_or_address(source: str, shown: str) -> None:
    data = make_application_error_data(ErrorCode.UPSTREAM_UNAVAILABLE, "r", errorSource=source)
    assert data.error_source == shown
    assert "example.com" not in data.model_dump_json()
    assert "10.0.0.5" not in data.model_dump_json()


@pytest.mark.reason("error_data_build_failed")
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("errorSource", "ftp:server"),
        ("errorSource", "mcp"),
        ("errorSource", "mcp:"),
        ("errorSource", "mcp:has space"),
        ("errorSource", "MCP:upper"),
        ("domain", "Subject_Management"),
        ("domain", "subject management"),
        ("domain", "-lead"),
        ("domain", "도메인"),
        ("retried", -1),
        ("retried", 1.5),
        ("retried", True),
        ("retried", "2"),
        ("retryAfterMs", -5),
        ("retryAfterMs", 2.5),
        ("retryAfterMs", "60000"),
        ("domainCode", "DOC 005"),
        ("node", {"id": "", "kind": "x"}),
        ("guardrail", {"violationCategory": "Has Space"}),
    ],
)
def test_invalid_value_falls_back_and_logs(
    field: str, value: object, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="llamon_agent.errors"):
        data = make_application_error_data(
            ErrorCode.RATE_LIMITED, "intended_reason", "", retriable=True, **{field: value}
        )
    assert _triple(data) == FALLBACK
    assert "intended_reason" in caplog.text
    assert "RATE_LIMITED" in caplog.text


@pytest.mark.parametrize("reason", ["", "한글_reason", "tab\there", "x" * 129])
def test_error_reason_must_be_non_empty_printable_ascii(reason: str) -> None:
    assert _triple(make_application_error_data(ErrorCode.NOT_FOUND, reason)) == FALLBACK


def test_error_reason_is_not_forced_to_snake_case() -> None:
    assert make_application_error_data(ErrorCode.NOT_FOUND, "Not-Snake.Case").error_reason == (
        "Not-Snake.Case"
    )


def test_unknown_code_falls_back() -> None:
    assert _triple(make_application_error_data("NOPE", "r")) == FALLBACK


def test_unknown_extra_falls_back_at_response_time(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="llamon_agent.errors"):
        data = make_application_error_data(ErrorCode.NOT_FOUND, "r", retryAfterMS=1)
    assert _triple(data) == FALLBACK
    assert "retryAfterMS" in caplog.text


def test_protocol_data_has_no_flow_fields() -> None:
    data = make_protocol_error_data(
        ErrorCode.INVALID_INPUT, "no_usable_part", node={"id": "a", "kind": "b"}
    )
    assert _triple(data) == FALLBACK
    ok = make_protocol_error_data(ErrorCode.INVALID_INPUT, "payload_too_large", "too big")
    assert ok.to_wire() == {
        "errorCode": "INVALID_INPUT",
        "errorReason": "payload_too_large",
        "errorMessage": "too big",
        "retriable": False,
        "retried": 0,
    }


def test_normalize_extras_names_the_unknown_key() -> None:
    with pytest.raises(TypeError, match="'retryAfter'"):
        normalize_extras({"retryAfter": 1})
    with pytest.raises(TypeError, match="given twice"):
        normalize_extras({"retryAfterMs": 1, "retry_after_ms": 2})


def test_error_message_is_scrubbed() -> None:
    data = make_application_error_data(
        ErrorCode.AUTH_REQUIRED, "r", "token rejected: Bearer abcdefghijklmnopqrstuvwxyz012345"
    )
    assert "abcdefghijklmnop" not in data.error_message


def test_parts_are_text_then_data() -> None:
    data = make_application_error_data(
        ErrorCode.UPSTREAM_TIMEOUT, "timeout", "slow upstream", retriable=True
    )
    parts = application_error_to_parts(data)
    assert all(isinstance(p, Part) for p in parts)
    text, payload = parts[0].root, parts[1].root
    assert isinstance(text, TextPart)
    assert text.text == "slow upstream"
    assert isinstance(payload, DataPart)
    assert payload.data["errorCode"] == "UPSTREAM_TIMEOUT"
    assert payload.data["retriable"] is True


def test_parts_display_text_and_default_sentence() -> None:
    data = make_application_error_data(ErrorCode.RATE_LIMITED, "r")
    assert text_of(application_error_to_parts(data)[0]) == "Too many requests; try again later."
    assert text_of(application_error_to_parts(data, "잠시 후 다시")[0]) == "잠시 후 다시"


@pytest.mark.reason("guardrail_blocked")
def test_guardrail_extras_and_error() -> None:
    assert build_guardrail_extras("self-harm", locator="input-filter", severity="high") == {
        "errorSource": "guardrail:input-filter",
        "guardrail": {"violationCategory": "self-harm", "severity": "high"},
    }
    data = build_guardrail_application_error("pii_leak", "blocked", policy_id="POL_7")
    assert data.to_wire() == {
        "errorCode": "GUARDRAIL_BLOCKED",
        "errorReason": "guardrail_blocked",
        "errorMessage": "blocked",
        "retriable": False,
        "retried": 0,
        "errorSource": "guardrail:policy",
        "guardrail": {"violationCategory": "pii_leak", "policyId": "POL_7"},
    }


def test_guardrail_error_with_bad_category_falls_back() -> None:
    assert _triple(build_guardrail_application_error("Bad Category")) == FALLBACK
