"""A LlamonError may carry its own (code, reason, retriable); one rule of the table reads it."""

from __future__ import annotations

import logging

import pytest

from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode, ErrorRule
from llamon_agent.exceptions import (
    ComponentInvokeError,
    LlamonApplicationError,
    LlamonError,
    MissingFieldError,
)


class QuotaFromHeaders(ComponentInvokeError):
    """A generic wrapper's subclass whose answer depends on the instance."""

    def __init__(self, message: str, *, exhausted: bool) -> None:
        super().__init__(message)
        self.exhausted = exhausted

    @property
    def carried(self) -> ErrorRule | None:
        return ErrorRule(ErrorCode.RATE_LIMITED, "vendor_quota", True) if self.exhausted else None


class Broken(LlamonError):
    @property
    def carried(self) -> ErrorRule | None:
        raise RuntimeError("bug")


def test_nothing_is_carried_by_default() -> None:
    assert LlamonError("x").carried is None
    assert MissingFieldError("x").carried is None
    assert MissingFieldError("x").to_dict()["reason"] == "missing_field_error"
    assert "error_code" not in MissingFieldError("x").to_dict()


def test_an_application_error_carries_what_it_was_raised_with() -> None:
    exc = LlamonApplicationError("RATE_LIMITED", "quota", retriable=True, retryAfterMs=500)
    assert exc.carried == ErrorRule(ErrorCode.RATE_LIMITED, "quota", True)
    found = classify_exception(exc)
    assert (found.as_tuple(), found.retry_after_ms) == (
        (ErrorCode.RATE_LIMITED, "quota", True),
        500,
    )


def test_what_is_carried_is_read_before_any_row() -> None:
    assert classify_exception(QuotaFromHeaders("q", exhausted=True)).as_tuple() == (
        ErrorCode.RATE_LIMITED,
        "vendor_quota",
        True,
    )
    assert classify_exception(QuotaFromHeaders("q", exhausted=False)).as_tuple() == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "quota_from_headers",
        True,
    )


def test_envelope_reports_the_carried_or_declared_rule() -> None:
    envelope = QuotaFromHeaders("q", exhausted=True).to_dict()
    assert (envelope["reason"], envelope["error_code"], envelope["retryable"]) == (
        "vendor_quota",
        "RATE_LIMITED",
        True,
    )

    class Declared(LlamonError, code=ErrorCode.NOT_FOUND, reason="thing_missing"):
        pass

    envelope = Declared("x").to_dict()
    assert (envelope["reason"], envelope["error_code"], envelope["retryable"]) == (
        "thing_missing",
        "NOT_FOUND",
        False,
    )


def test_a_broken_property_falls_back_to_the_type(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "llamon_agent.errors"):
        found = classify_exception(Broken("x"))
    assert found.as_tuple() == (ErrorCode.INTERNAL_ERROR, "broken", False)
    assert "Broken.carried failed" in caplog.text
