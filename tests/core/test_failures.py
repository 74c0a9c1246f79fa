"""FailureRecord: from exceptions, from envelopes, from reasons; always scrubbed."""

from __future__ import annotations

import json

import httpx
import pytest

from llamon_agent.core.catalog import reason_spec
from llamon_agent.core.codes import ErrorCode, Stage
from llamon_agent.core.failures import FailureRecord
from llamon_agent.exceptions import ComponentInvokeError, MissingFieldError

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig123456"


class PlanSynthesisError(Exception):
    """A workflow engine's exception: adapters call to_dict(), never parse the message."""

    def to_dict(self) -> dict[str, object]:
        return {
            "stage": "synthesize",
            "reason": "unsatisfied_field",
            "message": "required field cannot be supplied",
            "field_name": "orderNo",
            "semantic_tag": "order_id",
            "target_tool": "getOrderDetail",
        }


@pytest.mark.reason("unsatisfied_field")
def test_record_from_an_engine_envelope() -> None:
    record = FailureRecord.from_exception(
        PlanSynthesisError("ignored text"), tool="getOrderDetail", plan_id="plan_01HZ"
    )
    assert record.to_dict() | {"time": None} == {
        "stage": "synthesize",
        "reason": "unsatisfied_field",
        "message": "required field cannot be supplied",
        "error_code": "INVALID_INPUT",
        "tool": "getOrderDetail",
        "plan_id": "plan_01HZ",
        "step_id": None,
        "retryable": False,
        "operator_action": "ask_user_or_add_context_default",
        "evidence": {
            "exception_type": "PlanSynthesisError",
            "field_name": "orderNo",
            "semantic_tag": "order_id",
            "target_tool": "getOrderDetail",
        },
        "time": None,
    }


def test_record_from_a_llamon_exception_uses_its_envelope_and_the_table() -> None:
    record = FailureRecord.from_exception(MissingFieldError("query is empty", field_name="query"))
    assert (record.stage, record.reason, record.error_code, record.retryable) == (
        "bind_request",
        "missing_field_error",
        ErrorCode.INVALID_INPUT,
        False,
    )
    assert record.message == "query is empty"
    assert record.evidence["field_name"] == "query"


def test_record_from_a_mapped_foreign_exception() -> None:
    request = httpx.Request("GET", "https://api.example.test/")
    response = httpx.Response(503, request=request)
    record = FailureRecord.from_exception(
        httpx.HTTPStatusError("503", request=request, response=response), step_id="step_2"
    )
    assert (record.stage, record.reason, record.error_code, record.retryable) == (
        "execute",
        "http_5xx",
        ErrorCode.UPSTREAM_UNAVAILABLE,
        True,
    )
    assert record.operator_action == "retry_if_safe_and_check_api_logs"
    assert record.step_id == "step_2"


def test_record_from_an_unmapped_exception_withholds_its_text() -> None:
    record = FailureRecord.from_exception(RuntimeError("password for kim is hunter2"))
    assert record.reason == "runtime_error"
    assert record.stage == "service"
    assert "hunter2" not in json.dumps(record.to_dict())
    incident_id = record.evidence["incident_id"]
    assert isinstance(incident_id, str)
    assert incident_id in record.message
    assert record.operator_action == "inspect_server_log_by_incident_id"


def test_context_stage_overrides_the_catalog() -> None:
    record = FailureRecord.from_exception(ComponentInvokeError("x"), stage=Stage.FLOW_NODE)
    assert record.stage == "flow_node"


def test_of_fills_from_the_catalog() -> None:
    record = FailureRecord.of("repeated_tool_call", tool="add_numbers")
    spec = reason_spec("repeated_tool_call")
    assert spec is not None
    assert (record.stage, record.retryable, record.operator_action, record.message) == (
        "tool_loop",
        spec.retryable,
        spec.operator_action,
        spec.meaning,
    )


def test_of_unknown_reason_gets_code_defaults() -> None:
    record = FailureRecord.of("my_custom_reason", "m", error_code=ErrorCode.RATE_LIMITED)
    assert (record.stage, record.operator_action) == ("service", "back_off_or_raise_quota")


@pytest.mark.reason("uncaught_server_error")
def test_from_envelope_never_raises_on_odd_values() -> None:
    record = FailureRecord.from_envelope(
        {"reason": None, "error_code": "BOGUS", "retryable": "yes", "stage": 3, "message": 7}
    )
    assert record.reason == "uncaught_server_error"
    assert record.error_code is ErrorCode.INTERNAL_ERROR
    assert record.retryable is False
    assert record.stage == "3"


def test_direct_construction_is_scrubbed_too() -> None:
    record = FailureRecord(
        stage="execute",
        reason="auth_failed",
        message=f"rejected Authorization: Bearer {JWT}",
        evidence={"authorization": "Bearer abc", "http_status": 403, "raw_body": "secret"},
    )
    dumped = json.dumps(record.to_dict())
    assert "eyJzdWIi" not in dumped
    assert "Bearer abc" not in dumped
    assert record.evidence["http_status"] == 403
    assert "raw_body" not in record.evidence


def test_broken_to_dict_falls_back_to_the_table() -> None:
    class Broken(ComponentInvokeError):
        def to_dict(self) -> dict[str, object]:
            raise RuntimeError("no")

    record = FailureRecord.from_exception(Broken("x"))
    assert (record.reason, record.error_code) == ("broken", ErrorCode.UPSTREAM_UNAVAILABLE)


def test_to_dict_is_json_ready() -> None:
    record = FailureRecord.of("timeout", evidence={"elapsed_ms": 30_000, "input_tokens": 12})
    loaded = json.loads(json.dumps(record.to_dict()))
    assert loaded["evidence"] == {"elapsed_ms": 30_000, "input_tokens": 12}
    assert loaded["time"].endswith("+00:00")


@pytest.mark.parametrize(
    "reason",
    [
        "unknown_tool",
        "invalid_arguments",
        "tool_error",
        "malformed_arguments",
        "repeated_tool_call",
        "invalid_model_response",
        "max_rounds_exceeded",
    ],
)
def test_tool_loop_reasons_have_records(reason: str) -> None:
    record = FailureRecord.of(reason)
    assert record.stage in {"tool_loop", "model_call"}


def test_record_from_error_data_needs_no_second_classification() -> None:
    from llamon_agent.core.error_data import make_application_error_data

    data = make_application_error_data(
        ErrorCode.RATE_LIMITED,
        "rate_limited",
        "slow down",
        retriable=True,
        retryAfterMs=2000,
        errorSource="http:ocr/recognize",
    )
    record = FailureRecord.from_error_data(data, step_id="s1", evidence={"task_id": "t-1"})
    assert (record.stage, record.reason, record.error_code, record.retryable) == (
        "execute",
        "rate_limited",
        ErrorCode.RATE_LIMITED,
        True,
    )
    assert record.message == "slow down"
    assert record.operator_action == "back_off_or_raise_quota"
    assert dict(record.evidence) == {
        "retry_after_ms": 2000,
        "error_source": "http:ocr/recognize",
        "task_id": "t-1",
    }
