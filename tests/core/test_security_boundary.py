"""Property tests: a secret of any kind put anywhere a failure carries text never comes out.

Exception texts (mapped and unmapped, debug switch on), exception details, extras,
display text, failure records, error data on the wire, and the incident log line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from hypothesis import HealthCheck, assume, given, settings

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.error_data import application_error_to_parts, make_application_error_data
from llamon_agent.core.errors import error_data_for_exception
from llamon_agent.core.failures import FailureRecord
from llamon_agent.core.settings import set_debug_errors
from llamon_agent.exceptions import ComponentInvokeError, LlamonApplicationError
from tests._support.secret_strategies import SecretSample, innocent_evidence, secret_samples

PROPERTY = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def leaks(value: str, output: str) -> bool:
    """True if any 8-character piece of ``value`` appears in ``output``."""
    window = min(8, len(value))
    return any(value[i : i + window] in output for i in range(len(value) - window + 1))


def _wire(data: object) -> str:
    return json.dumps(data, ensure_ascii=False, default=str)


def assert_no_leak(sample: SecretSample, pipeline: Callable[[str, str], str]) -> None:
    """Run ``pipeline(value, text)`` and find no piece of the secret in what it emits.

    A piece that the same pipeline emits for a neutral value is fixed text of ours
    (``UNAVAILABLE``, ``exception_type``), not a leak; such examples are skipped.
    """
    neutral = "N" * len(sample.value)
    assume(not leaks(sample.value, pipeline(neutral, sample.text.replace(sample.value, neutral))))
    assert not leaks(sample.value, pipeline(sample.value, sample.text)), sample


def _mapped(value: str, text: str) -> str:
    exc = ComponentInvokeError(f"upstream said: {text} (retry later)")
    return _wire(
        [
            error_data_for_exception(exc).to_wire(),
            FailureRecord.from_exception(exc).to_dict(),
            exc.to_dict(),
        ]
    )


@PROPERTY
@given(sample=secret_samples())
def test_mapped_exception_text(sample: SecretSample) -> None:
    assert_no_leak(sample, _mapped)


def _unmapped_debug(value: str, text: str) -> str:
    exc = RuntimeError(f"driver failure: {text}")
    set_debug_errors(True)
    try:
        return _wire(
            [error_data_for_exception(exc).to_wire(), FailureRecord.from_exception(exc).to_dict()]
        )
    finally:
        set_debug_errors(None)


@PROPERTY
@given(sample=secret_samples())
def test_unmapped_exception_text_even_with_debug_on(sample: SecretSample) -> None:
    assert_no_leak(sample, _unmapped_debug)


NATURAL_KEY = {
    "bearer": "authorization",
    "jwt": "token",
    "api_key": "api_key",
    "cookie": "cookie",
    "password": "password",
    "url_userinfo": "dsn",
    "email": "email",
    "phone": "phone",
    "user_id": "user_id",
}


@PROPERTY
@given(sample=secret_samples())
def test_exception_details_and_evidence(sample: SecretSample) -> None:
    key = NATURAL_KEY.get(sample.kind, "secret")

    def pipeline(value: str, text: str) -> str:
        exc = ComponentInvokeError("lookup failed", **{key: value, "query": text})
        record = FailureRecord.from_exception(exc, evidence={key: value, "arguments_preview": text})
        return _wire([record.to_dict(), exc.to_dict()])

    assert_no_leak(sample, pipeline)


def _application(value: str, text: str) -> str:
    exc = LlamonApplicationError(ErrorCode.AUTH_REQUIRED, "token_rejected", message=f"no {text}")
    parts = application_error_to_parts(error_data_for_exception(exc), f"please retry: {text}")
    return _wire([part.model_dump(mode="json") for part in parts])


@PROPERTY
@given(sample=secret_samples())
def test_application_error_message_and_display_text(sample: SecretSample) -> None:
    assert_no_leak(sample, _application)


def _logged(call: Callable[[str], object], level: int) -> Callable[[str, str], str]:
    def pipeline(value: str, text: str) -> str:
        handler = _Capture()
        logger = logging.getLogger("llamon_agent.errors")
        logger.addHandler(handler)
        previous = logger.level
        logger.setLevel(level)
        try:
            call(text)
        finally:
            logger.removeHandler(handler)
            logger.setLevel(previous)
        return "\n".join(handler.lines)

    return pipeline


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@PROPERTY
@given(sample=secret_samples())
def test_invalid_extras_fallback_log_is_scrubbed(sample: SecretSample) -> None:
    def call(text: str) -> object:
        data = make_application_error_data(
            ErrorCode.NOT_FOUND, f"reason {text}", errorSource=f"bogus {text}"
        )
        assert data.error_reason == "error_data_build_failed"
        return data

    assert_no_leak(sample, _logged(call, logging.WARNING))


@PROPERTY
@given(sample=secret_samples())
def test_incident_log_line_is_scrubbed(sample: SecretSample) -> None:
    def call(text: str) -> object:
        return error_data_for_exception(ValueError(f"bad row {text}"))

    assert "incident" in _logged(call, logging.ERROR)("v", "plain")
    assert_no_leak(sample, _logged(call, logging.ERROR))


@PROPERTY
@given(evidence=innocent_evidence())
def test_innocent_evidence_survives_a_record(evidence: dict[str, object]) -> None:
    record = FailureRecord.of("timeout", evidence=evidence)
    for key, value in evidence.items():
        assert record.evidence[key] == value


def test_a_workflows_innocent_fields_survive() -> None:
    evidence = {
        "input_tokens": 1234,
        "session_id_hash": "9f86d081884c7d65",
        "xgen_auth_token_present": True,
        "session_station_header_names": ["Authorization"],
        "field_name": "orderNo",
        "http_status": 403,
    }
    assert dict(FailureRecord.of("auth_failed", evidence=evidence).evidence) == evidence
