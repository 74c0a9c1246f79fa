"""One rule for a called agent's failure one hop up: the same answer whether it arrives as
a re-raised ``RemoteAgentError`` or as a2a-sdk's raw ``A2AClientJSONRPCError`` with the
called agent's error data; the retrier reads the called agent's own code."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from a2a.client.errors import A2AClientJSONRPCError
from a2a.types import InternalError, JSONRPCErrorResponse

from llamon_agent.client import RemoteAgentError
from llamon_agent.core.classify import (
    HOP_PASSED,
    classify_exception,
    classify_received,
    registered_rules,
)
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import error_data_for_exception
from llamon_agent.core.failures import FailureRecord

E = ErrorCode

# the called agent's (code, retriable) -> what our caller receives (code, reason, retriable)
ONE_HOP_UP: list[tuple[ErrorCode, bool, ErrorCode, str, bool]] = [
    (E.UPSTREAM_UNAVAILABLE, True, E.UPSTREAM_UNAVAILABLE, "its_reason", True),
    (E.UPSTREAM_TIMEOUT, True, E.UPSTREAM_TIMEOUT, "its_reason", True),
    (E.RATE_LIMITED, True, E.RATE_LIMITED, "its_reason", True),
    (E.NOT_FOUND, False, E.NOT_FOUND, "its_reason", False),
    (E.GUARDRAIL_BLOCKED, False, E.GUARDRAIL_BLOCKED, "its_reason", False),
    (E.INVALID_INPUT, False, E.UPSTREAM_UNAVAILABLE, "a2a_request_rejected", False),
    (E.AUTH_REQUIRED, False, E.UPSTREAM_UNAVAILABLE, "a2a_upstream_auth_failed", False),
    (E.INTERNAL_ERROR, False, E.UPSTREAM_UNAVAILABLE, "a2a_upstream_error", False),
    (E.INTERNAL_ERROR, True, E.UPSTREAM_UNAVAILABLE, "a2a_upstream_error", True),
]


def _raw(code: ErrorCode, retriable: bool) -> A2AClientJSONRPCError:
    data: dict[str, Any] = {"errorCode": code.value, "errorReason": "its_reason"}
    data["retriable"] = retriable
    if code is E.RATE_LIMITED:
        data["retryAfterMs"] = 1500
    error = InternalError(data=data)
    return A2AClientJSONRPCError(JSONRPCErrorResponse(id=1, error=error))


def _remote(code: ErrorCode, retriable: bool) -> RemoteAgentError:
    after = 1500 if code is E.RATE_LIMITED else None
    return RemoteAgentError(
        "agent 'b' failed",
        code=code,
        reason="its_reason",
        retriable=retriable,
        retry_after_ms=after,
        agent="b",
        task_id="task-b",
    )


@pytest.mark.reason("a2a_request_rejected", "a2a_upstream_auth_failed", "a2a_upstream_error")
@pytest.mark.parametrize(("remote", "retriable", "code", "reason", "answered"), ONE_HOP_UP)
@pytest.mark.parametrize("form", [_raw, _remote], ids=["a2a-sdk-jsonrpc", "remote-agent-error"])
def test_both_forms_of_a_called_agents_failure_answer_the_same(
    form: Any,
    remote: ErrorCode,
    retriable: bool,
    code: ErrorCode,
    reason: str,
    answered: bool,
) -> None:
    exc = form(remote, retriable)
    found = classify_exception(exc)
    assert (found.code, found.reason, found.retriable) == (code, reason, answered)
    assert found.hop_from is remote
    assert found.retry_after_ms == (1500 if remote is E.RATE_LIMITED else None)
    received = classify_received(exc)
    assert (received.code, received.reason, received.retriable) == (remote, "its_reason", retriable)
    assert received.hop_from is None
    data = error_data_for_exception(exc).to_wire()
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        code.value,
        reason,
        answered,
    )


def test_the_cause_chain_keeps_the_called_agents_own_code() -> None:
    exc = _remote(E.INVALID_INPUT, False)
    data = error_data_for_exception(exc).to_wire()
    assert data["errorCode"] == "UPSTREAM_UNAVAILABLE"
    assert data["cause"] == [
        {
            "agent": "b",
            "taskId": "task-b",
            "errorCode": "INVALID_INPUT",
            "errorReason": "its_reason",
        }
    ]
    record = FailureRecord.from_exception(exc)
    assert record.reason == "a2a_request_rejected"
    assert record.evidence["cause"] == data["cause"]


def test_an_ordinary_failure_is_not_read_one_hop_up() -> None:
    exc = PermissionError("x")
    found = classify_exception(exc)
    assert found.hop_from is None
    assert classify_received(exc) == found


def test_the_printed_rows_are_the_rule() -> None:
    rows = {row.key: row for row in registered_rules() if row.key.startswith("called agent ")}
    passed = ", ".join(code.value for code in ErrorCode if code in HOP_PASSED)
    assert rows[f"called agent {passed}"].code == "(its own)"
    for code, _, answered, reason, _ in ONE_HOP_UP:
        if code in HOP_PASSED:
            continue
        row = rows[f"called agent {code.value}"]
        found = classify_exception(_remote(code, False))
        assert (
            (row.code, row.reason)
            == (found.code.value, found.reason)
            == (
                answered.value,
                reason,
            )
        )


def test_the_errors_doc_example_runs() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "errors.md").read_text(encoding="utf-8")
    (block,) = [
        b for b in re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL) if "hop_from" in b
    ]
    exec(compile(block, "errors.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), {})  # noqa: S102
