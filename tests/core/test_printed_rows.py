"""The rows ``llamon errors`` prints come from the rules they describe, not a second copy."""

from __future__ import annotations

import json

import httpx
import pytest
from a2a.client.errors import A2AClientJSONRPCError
from a2a.types import JSONRPCError, JSONRPCErrorResponse
from mcp.shared.exceptions import MCPError
from typer.testing import CliRunner

from llamon_agent.cli import app
from llamon_agent.core.classify import RuleRow, classify_exception, registered_rules
from llamon_agent.core.codes import JSON_RPC_CODE_TO_ERROR_CODE


def _rows(prefix: str) -> dict[str, RuleRow]:
    return {row.key: row for row in registered_rules() if row.key.startswith(prefix)}


def _answer(exc: BaseException) -> tuple[str, str, str]:
    found = classify_exception(exc)
    return (found.code.value, found.reason, str(found.retriable).lower())


def _printed(row: RuleRow) -> tuple[str, str, str]:
    return (row.code, row.reason, row.retriable)


def _status_error(status: int) -> httpx.HTTPStatusError:
    request = httpx.Request("GET", "https://api.example.test/v1")
    response = httpx.Response(status, request=request)
    return httpx.HTTPStatusError("failed", request=request, response=response)


def _status_row(status: int) -> RuleRow:
    rows = _rows("HTTPStatusError ")
    for key, row in rows.items():
        if str(status) in key.removeprefix("HTTPStatusError ").split(", "):
            return row
    return rows["HTTPStatusError 5xx" if status >= 500 else "HTTPStatusError other 4xx"]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 408, 409, 410, 418, 429, 500, 503, 599])
def test_every_status_row_is_what_the_rule_answers(status: int) -> None:
    assert _answer(_status_error(status)) == _printed(_status_row(status))


def test_every_mcp_row_is_what_the_rule_answers() -> None:
    rows = _rows("MCPError ")
    checked = 0
    for key, row in rows.items():
        code = key.removeprefix("MCPError ")
        if code == "other":
            assert _answer(MCPError(-32602, "Invalid params")) == _printed(row)
        else:
            said = row.note.split(": ", 1)
            messages = said[1].split(" / ") if len(said) > 1 else ["any text"]
            for message in messages:
                assert _answer(MCPError(int(code), message)) == _printed(row), key
        checked += 1
    assert checked == 5


def _a2a_error(code: int) -> A2AClientJSONRPCError:
    error = JSONRPCError(code=code, message="refused")
    return A2AClientJSONRPCError(JSONRPCErrorResponse(id=1, error=error))


def test_every_a2a_code_is_in_the_row_that_answers_it() -> None:
    rows = [row for key, row in _rows("A2AClientJSONRPCError ").items() if "+ data" not in key]
    for number in [*JSON_RPC_CODE_TO_ERROR_CODE, -32099]:
        listed = [row for row in rows if str(number) in row.note.split(", ")]
        unknown = [row for row in rows if "any unknown code" in row.note]
        (row,) = listed or unknown
        assert _answer(_a2a_error(number)) == _printed(row), number


def test_the_fallback_row_is_the_fallback() -> None:
    (row,) = [row for row in registered_rules() if row.key == "anything else"]
    assert (row.code, row.retriable) == _answer(ValueError("x"))[::2]


def test_the_cli_prints_the_generated_rows() -> None:
    result = CliRunner().invoke(app, ["errors", "--json"], env={"COLUMNS": "240"})
    printed = json.loads(result.output)["exceptionMapping"]
    assert printed == [
        {
            "exception": row.key,
            "errorCode": row.code,
            "errorReason": row.reason,
            "retriable": row.retriable,
            "note": row.note,
        }
        for row in registered_rules()
    ]
