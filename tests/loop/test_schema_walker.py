"""One JSON-schema walker, two message styles (the loop's and the MCP tools')."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llamon_agent.loop import validation
from llamon_agent.loop.validation import check_schema, first_schema_problem, json_type_name
from llamon_agent.mcp import arguments

SRC = Path(__file__).parents[2] / "src" / "llamon_agent"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "limit": {"type": "integer", "enum": [1, 2, 3]},
        "where": {"$ref": "#/$defs/Place"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["title"],
    "additionalProperties": False,
    "$defs": {
        "Place": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        }
    },
}


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (None, "null"),
        (True, "boolean"),
        (3, "integer"),
        (3.5, "number"),
        ("x", "string"),
        ({}, "object"),
        ([], "array"),
        ((), "array"),
        (1j, "complex"),
    ],
)
def test_json_type_name(value: object, name: str) -> None:
    assert json_type_name(value) == name


@pytest.mark.parametrize(
    ("args", "line", "problems"),
    [
        ({"title": "x"}, None, []),
        ({}, "Missing required argument: title", ["field 'title': Field required"]),
        (
            {"title": 1},
            "Invalid argument type: title should be a string, not an integer",
            ["field 'title': Input should be a valid string"],
        ),
        (
            {"title": "x", "note": 2},
            "Invalid argument type: note should be a string or null, not an integer",
            ["field 'note': Input should be a valid string or null"],
        ),
        (
            {"title": "x", "where": "Seoul"},
            "Invalid argument type: where should be an object, not a string",
            ["field 'where': Input should be a valid object"],
        ),
        # finer problems: the loop names them, the MCP style leaves them to the server
        ({"title": "x", "limit": 5}, None, ["field 'limit': Input should be one of 1, 2, 3"]),
        ({"title": "x", "where": {}}, None, ["field 'where.city': Field required"]),
        ({"title": "x", "other": 1}, None, ["field 'other': Extra inputs are not permitted"]),
    ],
)
def test_two_styles_of_one_walk(
    args: dict[str, Any], line: str | None, problems: list[str]
) -> None:
    assert first_schema_problem(SCHEMA, args) == line
    assert [str(p) for p in check_schema(SCHEMA, args)] == problems


def test_a_path_prefixes_every_field() -> None:
    assert [p.field for p in check_schema({"type": "integer"}, "x", "n")] == ["n"]
    assert [p.field for p in check_schema(SCHEMA, {}, "args")] == ["args.title"]
    items = {"type": "array", "items": {"type": "integer"}}
    assert [p.field for p in check_schema(items, ["x"], "ids")] == ["ids[0]"]


def test_mcp_keeps_no_walker_of_its_own() -> None:
    assert arguments.json_type_name is validation.json_type_name
    source = (SRC / "mcp" / "arguments.py").read_text(encoding="utf-8")
    assert "def _" not in source
    assert "properties" not in source.split('"""', 2)[2]
