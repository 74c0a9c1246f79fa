"""Our side of argument checking: one line the model can act on, or None."""

from __future__ import annotations

from typing import Any

import pytest

from llamon_agent.mcp import check_arguments

# What mcp's MCPServer lists for ``def f(title: str, limit: int = 5, note: str | None = None,
# tags: list[str] = [], price: float = 1.0, gift: bool = False, where: Place | None)``.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"title": "Title", "type": "string"},
        "limit": {"default": 5, "title": "Limit", "type": "integer"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "tags": {"type": "array", "items": {"type": "string"}},
        "price": {"type": "number"},
        "gift": {"type": "boolean"},
        "where": {"anyOf": [{"$ref": "#/$defs/Place"}, {"type": "null"}]},
        "anything": {},
        "code": {"type": ["string", "integer"]},
    },
    "required": ["title"],
    "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}},
}


def test_valid_arguments_pass() -> None:
    args = {
        "title": "Dune",
        "limit": 3,
        "note": None,
        "tags": ["a"],
        "price": 2,
        "gift": True,
        "where": {"city": "Seoul"},
        "anything": [1, {"x": None}],
        "code": 7,
    }
    assert check_arguments(SCHEMA, args) is None


def test_a_missing_required_argument_is_one_line() -> None:
    assert check_arguments(SCHEMA, {}) == "Missing required argument: title"


def test_several_missing_arguments_are_named_in_schema_order() -> None:
    schema = {"type": "object", "required": ["title", "quantity"], "properties": {}}
    assert check_arguments(schema, {}) == "Missing required arguments: title, quantity"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ({"title": 3}, "Invalid argument type: title should be a string, not an integer"),
        (
            {"title": "x", "limit": "5"},
            "Invalid argument type: limit should be an integer, not a string",
        ),
        (
            {"title": "x", "limit": True},
            "Invalid argument type: limit should be an integer, not a boolean",
        ),
        (
            {"title": "x", "limit": 2.5},
            "Invalid argument type: limit should be an integer, not a number",
        ),
        (
            {"title": "x", "note": 1},
            "Invalid argument type: note should be a string or null, not an integer",
        ),
        (
            {"title": "x", "tags": "a"},
            "Invalid argument type: tags should be an array, not a string",
        ),
        (
            {"title": "x", "price": "1"},
            "Invalid argument type: price should be a number, not a string",
        ),
        (
            {"title": "x", "gift": "yes"},
            "Invalid argument type: gift should be a boolean, not a string",
        ),
        (
            {"title": "x", "where": "Seoul"},
            "Invalid argument type: where should be an object or null, not a string",
        ),
        (
            {"title": "x", "code": 1.5},
            "Invalid argument type: code should be a string or an integer, not a number",
        ),
    ],
)
def test_a_wrong_type_is_one_line(args: dict[str, Any], line: str) -> None:
    assert check_arguments(SCHEMA, args) == line


def test_integral_floats_are_integers_as_in_json() -> None:
    assert check_arguments(SCHEMA, {"title": "x", "limit": 3.0}) is None


def test_unknown_fields_and_unknown_schemas_are_left_to_the_server() -> None:
    assert check_arguments(SCHEMA, {"title": "x", "extra": object()}) is None
    assert check_arguments({"type": "object"}, {"a": 1}) is None
    odd = {"properties": {"a": {"$ref": "https://example.com/s.json"}, "b": {"type": "decimal"}}}
    assert check_arguments(odd, {"a": 1, "b": "x"}) is None


def test_arguments_must_be_an_object() -> None:
    assert check_arguments(SCHEMA, ["Dune"]) == (
        "Invalid arguments: expected a JSON object, not an array"
    )
    assert check_arguments(SCHEMA, None) == "Invalid arguments: expected a JSON object, not null"


def test_values_never_appear_in_the_line() -> None:
    line = check_arguments(SCHEMA, {"title": 12345})
    assert line is not None
    assert "12345" not in line
