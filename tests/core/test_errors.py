"""The public error API: every name importable, raise helpers, domain catalogs, and the
exception -> ApplicationErrorData path the executor uses."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from llamon_agent.core import errors
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import (
    DomainErrorSpec,
    LlamonApplicationError,
    error_data_for_exception,
    make_domain_error_raiser,
    raise_application_error,
)
from llamon_agent.core.errors import (
    ErrorCode as PublicErrorCode,
)
from llamon_agent.core.settings import set_debug_errors
from llamon_agent.exceptions import ComponentInvokeError, GuardrailBlockedError

PUBLIC_API = [
    "ErrorCode",
    "JSON_RPC_CODE_TO_ERROR_CODE",
    "BaseErrorData",
    "ProtocolErrorData",
    "ApplicationErrorData",
    "ErrorNode",
    "ErrorFlow",
    "python_exc_to_error_code",
    "json_rpc_to_error_code",
    "make_protocol_error_data",
    "make_application_error_data",
    "application_error_to_parts",
    "build_guardrail_application_error",
    "build_guardrail_extras",
    "LlamonApplicationError",
    "raise_application_error",
    "make_domain_error_raiser",
    "DomainErrorSpec",
]


def test_the_public_api_is_importable_from_core_errors() -> None:
    namespace: dict[str, object] = {}
    exec(f"from llamon_agent.core.errors import ({', '.join(PUBLIC_API)})", namespace)  # noqa: S102
    assert all(name in namespace for name in PUBLIC_API)
    assert set(PUBLIC_API) <= set(errors.__all__)


def test_error_code_has_exactly_the_eight_documented_values() -> None:
    assert [code.value for code in PublicErrorCode] == [
        "INVALID_INPUT",
        "AUTH_REQUIRED",
        "NOT_FOUND",
        "UPSTREAM_UNAVAILABLE",
        "UPSTREAM_TIMEOUT",
        "RATE_LIMITED",
        "GUARDRAIL_BLOCKED",
        "INTERNAL_ERROR",
    ]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (-32700, "INVALID_INPUT"),
        (-32600, "INVALID_INPUT"),
        (-32601, "INVALID_INPUT"),
        (-32602, "INVALID_INPUT"),
        (-32603, "INTERNAL_ERROR"),
        (-32001, "NOT_FOUND"),
        (-32002, "INVALID_INPUT"),
        (-32003, "INVALID_INPUT"),
        (-32004, "INVALID_INPUT"),
        (-32005, "INVALID_INPUT"),
        (-32006, "INTERNAL_ERROR"),
        (-32007, "NOT_FOUND"),
        (-32050, "INTERNAL_ERROR"),
        (12345, "INTERNAL_ERROR"),
    ],
)
def test_json_rpc_codes(code: int, expected: str) -> None:
    assert errors.json_rpc_to_error_code(code).value == expected


def test_json_rpc_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        errors.JSON_RPC_CODE_TO_ERROR_CODE[-1] = ErrorCode.NOT_FOUND  # type: ignore[index]


def test_the_raise_application_error_example() -> None:
    with pytest.raises(LlamonApplicationError) as caught:
        raise_application_error(
            ErrorCode.RATE_LIMITED,
            "classifier_quota_exceeded",
            message="분류 서비스 일일 할당량 초과",
            retriable=True,
            retryAfterMs=60_000,
        )
    data = error_data_for_exception(caught.value)
    assert data.to_wire() == {
        "errorCode": "RATE_LIMITED",
        "errorReason": "classifier_quota_exceeded",
        "errorMessage": "분류 서비스 일일 할당량 초과",
        "retriable": True,
        "retried": 0,
        "retryAfterMs": 60_000,
    }


def test_raise_application_error_accepts_every_documented_extra() -> None:
    with pytest.raises(LlamonApplicationError) as caught:
        raise_application_error(
            "UPSTREAM_UNAVAILABLE",
            "account_owner_check_failed",
            message="owner check failed",
            retriable=True,
            errorSource="mcp:MCP-001/check_account_owner",
            domain="subject-management",
            domainCode="SUB_003",
            retried=1,
            node={"id": "check_owner", "kind": "business"},
            flow={"completedNodes": ["fetch_subject"]},
        )
    wire = error_data_for_exception(caught.value).to_wire()
    assert wire["errorSource"] == "mcp:MCP-001/check_account_owner"
    assert wire["node"] == {"id": "check_owner", "kind": "business"}
    assert wire["flow"] == {"completedNodes": ["fetch_subject"]}
    assert wire["domainCode"] == "SUB_003"
    assert wire["retried"] == 1


def test_unknown_extra_is_an_error_at_the_raise_site() -> None:
    with pytest.raises(TypeError, match="retryAfterSeconds"):
        raise_application_error(ErrorCode.RATE_LIMITED, "r", message="m", retryAfterSeconds=3)


def test_unknown_code_is_an_error_at_the_raise_site() -> None:
    with pytest.raises(ValueError, match="SLOW_DOWN"):
        raise_application_error("SLOW_DOWN", "r", message="m")


@pytest.mark.reason("error_data_build_failed")
def test_bad_extra_value_falls_back_at_response_time() -> None:
    with pytest.raises(LlamonApplicationError) as caught:
        raise_application_error(ErrorCode.NOT_FOUND, "r", message="m", errorSource="nowhere")
    data = error_data_for_exception(caught.value)
    assert (data.error_code, data.error_reason) == (
        ErrorCode.INTERNAL_ERROR,
        "error_data_build_failed",
    )


CATALOG: dict[str, DomainErrorSpec] = {
    "DOC_001": {
        "sdk_code": ErrorCode.INVALID_INPUT,
        "reason": "doc_format_unsupported",
        "title": "지원하지 않는 문서 형식",
    },
    "DOC_005": {
        "sdk_code": ErrorCode.UPSTREAM_UNAVAILABLE,
        "reason": "ocr_service_down",
        "title": "OCR 서비스 장애",
        "retriable": True,
    },
}


def test_domain_raiser_yields_code_reason_domain_code_and_domain() -> None:
    raise_doc = make_domain_error_raiser(CATALOG, domain="document-review")
    with pytest.raises(LlamonApplicationError) as caught:
        raise_doc("DOC_005")
    assert error_data_for_exception(caught.value).to_wire() == {
        "errorCode": "UPSTREAM_UNAVAILABLE",
        "errorReason": "ocr_service_down",
        "errorMessage": "OCR 서비스 장애",
        "retriable": True,
        "retried": 0,
        "domain": "document-review",
        "domainCode": "DOC_005",
    }


def test_domain_raiser_message_override_and_extras() -> None:
    raise_doc = make_domain_error_raiser(CATALOG, domain="document-review")
    exc = raise_doc.error("DOC_001", "PDF만 지원합니다", errorSource="validator:upload")
    wire = error_data_for_exception(exc).to_wire()
    assert wire["errorMessage"] == "PDF만 지원합니다"
    assert wire["errorSource"] == "validator:upload"
    assert wire["retriable"] is False


def test_domain_raiser_unknown_key_is_a_clear_error() -> None:
    raise_doc = make_domain_error_raiser(CATALOG, domain="document-review")
    with pytest.raises(LookupError, match=r"'DOC_999'.*document-review.*DOC_001, DOC_005"):
        raise_doc("DOC_999")


@pytest.mark.parametrize(
    ("catalog", "domain", "match"),
    [
        (CATALOG, "Document Review", "kebab-case"),
        ({"DOC 1": CATALOG["DOC_001"]}, "doc", "'DOC 1'"),
        ({"DOC_1": {"sdk_code": "NOPE", "reason": "r", "title": "t"}}, "doc", "'DOC_1'"),
        (
            {"DOC_1": {"sdk_code": ErrorCode.NOT_FOUND, "reason": "", "title": "t"}},
            "doc",
            "'DOC_1'",
        ),
        ({"DOC_1": {"sdk_code": ErrorCode.NOT_FOUND, "title": "t"}}, "doc", "'DOC_1'"),
    ],
)
def test_domain_catalog_is_checked_when_made(
    catalog: dict[str, Any], domain: str, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        make_domain_error_raiser(catalog, domain=domain)


def test_mapped_exception_message_is_its_scrubbed_text() -> None:
    data = error_data_for_exception(ComponentInvokeError("bank lookup failed for a@b.example"))
    assert data.error_code is ErrorCode.UPSTREAM_UNAVAILABLE
    assert data.error_message.startswith("bank lookup failed for ")
    assert "a@b.example" not in data.error_message
    assert data.incident_id is None


def test_unmapped_exception_text_is_withheld_behind_an_incident_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="llamon_agent.errors"):
        data = error_data_for_exception(RuntimeError("db row 42 for customer 'kim'"))
    assert (data.error_code, data.error_reason, data.retriable) == (
        ErrorCode.INTERNAL_ERROR,
        "runtime_error",
        False,
    )
    assert "kim" not in data.error_message
    assert data.incident_id is not None
    assert data.error_message == f"Internal error (incident {data.incident_id})."
    assert data.incident_id in caplog.text
    assert "Traceback" in caplog.text or "RuntimeError" in caplog.text


def test_debug_setting_shows_unmapped_text() -> None:
    set_debug_errors(True)
    try:
        data = error_data_for_exception(RuntimeError("widget exploded"))
    finally:
        set_debug_errors(None)
    assert data.error_message.endswith("RuntimeError: widget exploded")


def test_debug_setting_via_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLAMON_DEBUG_ERRORS", "1")
    assert "widget" in error_data_for_exception(RuntimeError("widget")).error_message
    monkeypatch.setenv("LLAMON_DEBUG_ERRORS", "0")
    assert "widget" not in error_data_for_exception(RuntimeError("widget")).error_message


@pytest.mark.reason("guardrail_blocked_error")
def test_guardrail_exception_becomes_guardrail_data() -> None:
    data = error_data_for_exception(
        GuardrailBlockedError("blocked", violation_category="self-harm", severity="high")
    )
    assert data.to_wire() == {
        "errorCode": "GUARDRAIL_BLOCKED",
        "errorReason": "guardrail_blocked_error",
        "errorMessage": "blocked",
        "retriable": False,
        "retried": 0,
        "errorSource": "guardrail:policy",
        "guardrail": {"violationCategory": "self-harm", "severity": "high"},
    }


def test_flow_context_extras_are_added() -> None:
    data = error_data_for_exception(
        ComponentInvokeError("MCP down"),
        node={"id": "rag_search", "kind": "business"},
        flow={"completedNodes": ["fetch_subject"]},
    )
    wire = data.to_wire()
    assert wire["errorCode"] == "UPSTREAM_UNAVAILABLE"
    assert wire["node"] == {"id": "rag_search", "kind": "business"}
    assert wire["flow"] == {"completedNodes": ["fetch_subject"]}


def test_retry_after_from_http_429_reaches_the_data() -> None:
    import httpx

    request = httpx.Request("GET", "https://api.example.test/")
    response = httpx.Response(429, headers={"Retry-After": "2"}, request=request)
    data = error_data_for_exception(
        httpx.HTTPStatusError("429", request=request, response=response)
    )
    assert (data.error_code, data.retry_after_ms, data.retriable) == (
        ErrorCode.RATE_LIMITED,
        2000,
        True,
    )


def test_error_data_for_exception_never_raises_on_a_broken_str() -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    data = error_data_for_exception(Broken())
    assert data.error_code is ErrorCode.INTERNAL_ERROR
    assert data.incident_id is not None
