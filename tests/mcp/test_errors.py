"""The MCP exceptions carry their classification; the table reads it with one rule."""

from __future__ import annotations

import re
from pathlib import Path

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from llamon_agent.core.classify import classify_exception, registered_rules
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.failures import FailureRecord
from llamon_agent.exceptions import ComponentInvokeError, LlamonError
from llamon_agent.mcp import classify_mcp_failure
from llamon_agent.mcp.errors import (
    MCPLoadError,
    MCPProtocolError,
    MCPToolTimeoutError,
    MCPToolUnavailableError,
)

SRC = Path(__file__).parents[2] / "src" / "llamon_agent"


def _load_error(cause: BaseException) -> MCPLoadError:
    return MCPLoadError("could not load", cause=cause)


ERRORS: list[tuple[LlamonError, tuple[ErrorCode, str, bool]]] = [
    (
        MCPToolUnavailableError("gone", reason="connection_closed", tool="t", attempts=3),
        (ErrorCode.UPSTREAM_UNAVAILABLE, "connection_closed", True),
    ),
    (MCPToolTimeoutError("slow", tool="t"), (ErrorCode.UPSTREAM_TIMEOUT, "timeout", True)),
    (
        MCPProtocolError("refused", mcp_code=-32602),
        (ErrorCode.UPSTREAM_UNAVAILABLE, "mcp_error", False),
    ),
    (
        _load_error(httpx2.ConnectError("refused")),
        (ErrorCode.UPSTREAM_UNAVAILABLE, "network_error", True),
    ),
    (_load_error(MCPError(-32001, "timed out")), (ErrorCode.UPSTREAM_TIMEOUT, "timeout", True)),
    (
        _load_error(FileNotFoundError("no such command")),
        (ErrorCode.UPSTREAM_UNAVAILABLE, "mcp_load_failed", False),
    ),
]


@pytest.mark.parametrize(("exc", "expected"), ERRORS, ids=lambda v: type(v).__name__)
def test_table_envelope_and_record_agree(
    exc: LlamonError, expected: tuple[ErrorCode, str, bool]
) -> None:
    assert classify_exception(exc).as_tuple() == expected
    envelope = exc.to_dict()
    assert (envelope["error_code"], envelope["reason"], envelope["retryable"]) == (
        expected[0].value,
        expected[1],
        expected[2],
    )
    record = FailureRecord.from_exception(exc)
    assert (record.error_code, record.reason, record.retryable) == expected


def test_a_wrapper_raised_from_an_escalation_takes_its_answer() -> None:
    cause = MCPToolUnavailableError("gone", reason="http_5xx")
    try:
        raise ComponentInvokeError("tool step failed") from cause
    except ComponentInvokeError as wrapper:
        found = classify_exception(wrapper)
    assert (found.code, found.reason, found.retriable, found.cause) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "http_5xx",
        True,
        cause,
    )


def test_importing_mcp_registers_no_rows() -> None:
    keys = {row.key for row in registered_rules()}
    names = {cls.__name__ for cls in (MCPLoadError, MCPProtocolError, MCPToolTimeoutError)}
    names.add(MCPToolUnavailableError.__name__)
    assert not [key for key in keys if key.rpartition(".")[2] in names]
    source = (SRC / "mcp" / "errors.py").read_text(encoding="utf-8")
    assert "register_exception" not in source
    assert "def to_dict" not in source


def test_the_public_name_is_the_one_classifier() -> None:
    assert classify_mcp_failure is classify_exception


def test_one_rule_reads_what_an_exception_carries() -> None:
    readers = [
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        for _ in re.finditer(r"\bexc\.carried\b", path.read_text(encoding="utf-8"))
    ]
    assert readers == ["core/classify.py"]
