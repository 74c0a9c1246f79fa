"""The ``RemoteAgentError`` family: each factory, the data kept as sent, the hops, and
the classification table reading what the error carries."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.client.errors import A2AClientHTTPError, A2AClientTimeoutError
from a2a.types import (
    DataPart,
    JSONRPCError,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
    TextPart,
)

from llamon_agent.client import (
    RemoteAgentError,
    RemoteApplicationErrorData,
    RemoteGuardrailBlockedError,
    RemoteInvalidInputError,
    RemoteRateLimitedError,
    RemoteTimeoutError,
    RemoteUnavailableError,
    remote_error_from_exception,
    remote_error_from_http,
    remote_error_from_jsonrpc,
    remote_error_from_task,
    remote_error_from_transport,
)
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode


def _task(state: TaskState, *parts: Part) -> Task:
    message = Message(role=Role.agent, parts=list(parts), message_id="m-1")
    return Task(
        id="t-1",
        context_id="c-1",
        status=TaskStatus(state=state, message=message if parts else None),
    )


_GUARDRAIL: dict[str, Any] = {
    "errorCode": "GUARDRAIL_BLOCKED",
    "errorReason": "self_harm_blocked",
    "errorMessage": "blocked",
    "retriable": False,
    "guardrail": {"violationCategory": "self-harm"},
    "incidentId": "0123456789ab",
    "futureField": {"kept": True},
    "cause": [
        {"agent": "C", "taskId": "t-9", "errorCode": "UPSTREAM_TIMEOUT", "errorReason": "timeout"}
    ],
}


def test_a_failed_task_keeps_every_field_unknown_ones_too() -> None:
    task = _task(
        TaskState.failed, Part(root=TextPart(text="blocked")), Part(root=DataPart(data=_GUARDRAIL))
    )
    error = remote_error_from_task(task, agent="B")
    assert isinstance(error, RemoteGuardrailBlockedError)
    assert isinstance(error.data, RemoteApplicationErrorData)
    assert error.data.guardrail is not None
    assert error.data.guardrail.violation_category == "self-harm"
    assert error.data.incident_id == "0123456789ab"
    assert error.data.model_extra is not None
    assert error.data.model_extra["futureField"] == {"kept": True}
    assert (error.task_id, error.context_id, error.agent) == ("t-1", "c-1", "B")
    assert error.cause_hops == [
        {
            "agent": "B",
            "taskId": "t-1",
            "errorCode": "GUARDRAIL_BLOCKED",
            "errorReason": "self_harm_blocked",
        },
        {"agent": "C", "taskId": "t-9", "errorCode": "UPSTREAM_TIMEOUT", "errorReason": "timeout"},
    ]


@pytest.mark.reason("remote_task_rejected")
def test_a_rejected_task_without_data_is_invalid_input() -> None:
    error = remote_error_from_task(_task(TaskState.rejected), agent="plain")
    assert isinstance(error, RemoteInvalidInputError)
    assert (error.reason, error.retriable, error.data) == ("remote_task_rejected", False, None)
    assert error.cause_hops == [
        {
            "agent": "plain",
            "taskId": "t-1",
            "errorCode": "INVALID_INPUT",
            "errorReason": "remote_task_rejected",
        }
    ]


def test_error_data_outside_the_conventions_falls_back_to_the_state() -> None:
    bad = {"errorCode": "RATE_LIMITED", "errorReason": "", "retriable": "yes"}
    error = remote_error_from_task(_task(TaskState.failed, Part(root=DataPart(data=bad))))
    assert (error.code, error.reason, error.data) == (
        ErrorCode.INTERNAL_ERROR,
        "remote_task_failed",
        None,
    )
    assert error.raw_data == bad


def test_a_jsonrpc_error_object_with_and_without_data() -> None:
    data = {
        "errorCode": "INVALID_INPUT",
        "errorReason": "payload_too_large",
        "retriable": False,
    }
    with_data = remote_error_from_jsonrpc(JSONRPCError(code=-32600, message="x", data=data))
    assert isinstance(with_data, RemoteInvalidInputError)
    assert (with_data.reason, with_data.jsonrpc_code) == ("payload_too_large", -32600)
    bare = remote_error_from_jsonrpc(JSONRPCError(code=-32603, message="Internal error"))
    assert isinstance(bare, RemoteUnavailableError)
    assert (bare.reason, bare.retriable, bare.data) == ("a2a_upstream_error", True, None)


def test_an_http_status_alone_reads_retry_after_from_its_headers() -> None:
    error = remote_error_from_http(429, headers={"retry-after": "2"}, agent="B")
    assert isinstance(error, RemoteRateLimitedError)
    assert (error.http_status, error.retry_after_ms) == (429, 2000)


def test_a_network_failure_a2a_reports_as_503_is_a_transport_error() -> None:
    request = httpx.Request("POST", "http://10.0.0.7:8080/")
    try:
        try:
            raise httpx.ConnectError("refused 10.0.0.7:8080", request=request)
        except httpx.ConnectError as inner:
            raise A2AClientHTTPError(503, "Network communication error") from inner
    except A2AClientHTTPError as wrapped:
        error = remote_error_from_exception(wrapped, agent="B")
    assert isinstance(error, RemoteUnavailableError)
    assert (error.reason, error.http_status) == ("network_error", None)
    assert "10.0.0.7" not in str(error)


def test_a_timeout_is_a_timeout_error() -> None:
    error = remote_error_from_transport(A2AClientTimeoutError("Client Request timed out"))
    assert isinstance(error, RemoteTimeoutError)
    assert isinstance(error, TimeoutError)
    assert (error.reason, error.retriable) == ("timeout", True)


def test_the_table_answers_with_what_the_error_carries() -> None:
    error = RemoteRateLimitedError(
        "quota", reason="classifier_quota_exceeded", retriable=True, retry_after_ms=1500
    )
    found = classify_exception(error)
    assert (found.code, found.reason, found.retriable, found.retry_after_ms) == (
        ErrorCode.RATE_LIMITED,
        "classifier_quota_exceeded",
        True,
        1500,
    )
    assert isinstance(error, RemoteAgentError)
    assert remote_error_from_exception(error) is error
