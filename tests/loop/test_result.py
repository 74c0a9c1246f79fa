"""ToolResult: the text the model reads, and failures that never leak."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic_core import to_jsonable_python

from llamon_agent.core.codes import ErrorCode
from llamon_agent.exceptions import ComponentInvokeError
from llamon_agent.loop import ToolResult


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        (5, "5"),
        ({"단어": [1, None]}, '{"단어": [1, null]}'),
        (None, "null"),
    ],
)
def test_ok_text(value: Any, text: str) -> None:
    result = ToolResult.ok(value)
    assert not result.is_error
    assert result.to_model_text() == text


def test_an_unrenderable_value_still_gives_text() -> None:
    class Weird:
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert ToolResult.ok(Weird()).to_model_text() == "<Weird result>"


def test_failure_text_is_one_actionable_line() -> None:
    result = ToolResult.failure("invalid_arguments", "field 'a': Input should be a valid integer")
    assert result.is_error
    assert result.to_model_text() == "invalid_arguments: field 'a': Input should be a valid integer"


def test_failure_text_is_scrubbed() -> None:
    result = ToolResult.failure("auth_failed", "login as kim@example.com with password=hunter2")
    text = result.to_model_text()
    assert "hunter2" not in text
    assert "kim@example.com" not in text


def test_a_failure_needs_a_code() -> None:
    with pytest.raises(ValueError, match="error_code"):
        ToolResult.failure("", "x")


def test_an_unmapped_crash_shows_only_an_incident() -> None:
    result = ToolResult.from_exception(KeyError("secret-row-17"), tool="x")
    text = result.to_model_text()
    assert re.fullmatch(r"tool_error: Tool 'x' failed \(incident [0-9a-f]{12}\)\.", text)
    assert result.record is not None
    assert result.record.reason == "tool_error"
    assert result.record.stage == "tool_loop"
    assert result.record.evidence["exception_type"] == "KeyError"
    assert str(result.record.evidence["incident_id"]) in text


def test_a_mapped_exception_shows_its_reason_and_text() -> None:
    result = ToolResult.from_exception(ComponentInvokeError("rag down"), tool="search")
    assert result.to_model_text() == (
        "tool_error: Tool 'search' failed (component_invoke_error): rag down"
    )
    assert result.record is not None
    assert result.record.evidence["cause_code"] == ErrorCode.UPSTREAM_UNAVAILABLE.value


def test_a_failure_text_the_model_reads_names_no_upstream_location() -> None:
    result = ToolResult.failure("lookup_failed", "the index at http://10.1.2.3:9200/idx is down")
    assert result.to_model_text() == "lookup_failed: the index at [REDACTED:url] is down"


@pytest.mark.parametrize(
    "value",
    [
        {"echo": 3},
        {"a": 1.5, "b": None, "c": True, "d": "é", "e": float("nan")},
        [1, "two", None, 10**30],
        7,
        None,
        {"nested": {"a": [1]}},
        {"é": 1},
        (1, 2),
        {1: "x"},
    ],
)
def test_a_result_reads_as_its_jsonable_form(value: object) -> None:
    expected = json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)
    assert ToolResult.ok(value).to_model_text() == expected


def test_a_result_that_cannot_be_made_jsonable_is_named_not_written() -> None:
    assert ToolResult.ok({"\ud800": 1}).to_model_text() == "<dict result>"
