"""Parsing arguments at the loop boundary, and the JSON-schema check for ToolLikes."""

from __future__ import annotations

from typing import Any

import pytest

from llamon_agent.loop.validation import (
    FieldProblem,
    check_arguments,
    check_schema,
    format_problems,
    parse_arguments,
    parsed_object,
)


@pytest.mark.parametrize(
    ("raw", "arguments"),
    [('{"a": 1}', {"a": 1}), ("", {}), ("  ", {}), ("{}", {})],
)
def test_objects_parse(raw: str, arguments: dict[str, Any]) -> None:
    assert parse_arguments(raw).arguments == arguments


@pytest.mark.parametrize(
    ("raw", "error_type", "problem"),
    [
        ("{oops", "json", "not valid JSON (Expecting property name enclosed in double quotes"),
        ('"text"', "not_an_object", "not a JSON object (got string)"),
        ("null", "not_an_object", "not a JSON object (got null)"),
        ("3", "not_an_object", "not a JSON object (got number)"),
        ('{"x": Infinity}', "json", "not valid JSON (Infinity is not valid JSON)"),
        ("[" * 100_000, "json", "not valid JSON"),
        ({"a": 1}, "not_a_string", "not a JSON string (got dict)"),
    ],
)
def test_anything_else_is_malformed(raw: Any, error_type: str, problem: str) -> None:
    parsed = parse_arguments(raw)
    assert parsed.arguments is None
    assert parsed.error_type == error_type
    assert parsed.problem.startswith(problem)


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "maybe": {"type": ["string", "null"]},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        },
        "free": {"type": "object"},
    },
    "required": ["n"],
    "additionalProperties": False,
}


def test_a_fitting_object_has_no_problems() -> None:
    value = {
        "n": 3.0,
        "ratio": 1,
        "flag": False,
        "mode": "fast",
        "maybe": None,
        "items": [{"name": "a"}],
        "free": {"anything": [1]},
    }
    assert check_schema(SCHEMA, value) == ()


def test_problems_name_their_fields() -> None:
    value = {
        "ratio": True,
        "flag": "yes",
        "mode": "medium",
        "maybe": 1,
        "items": [{"name": "a"}, {}],
        "extra": 1,
    }
    assert [str(p) for p in check_schema(SCHEMA, value)] == [
        "field 'n': Field required",
        "field 'ratio': Input should be a valid number",
        "field 'flag': Input should be a valid boolean",
        'field \'mode\': Input should be one of "fast", "slow"',
        "field 'maybe': Input should be a valid string or null",
        "field 'items[1].name': Field required",
        "field 'extra': Extra inputs are not permitted",
    ]


@pytest.mark.parametrize(
    ("schema", "value", "message"),
    [
        ({"type": "integer"}, "3", "Input should be a valid integer"),
        ({"type": "array"}, "x", "Input should be a valid array"),
        ({"type": "object"}, 1, "Input should be a valid object"),
        ({"type": "string"}, 1, "Input should be a valid string"),
        ({"type": ["integer", "string"]}, 1.5, "Input should be a valid integer or string"),
        ({"type": ["array", "null"]}, 1, "Input should be a valid array or null"),
        ({"type": "null"}, 1, "Input should be null"),
    ],
)
def test_every_type_message_reads_well(schema: dict[str, Any], value: Any, message: str) -> None:
    assert [p.message for p in check_schema(schema, value)] == [message]


def test_integers_are_not_booleans_or_fractions() -> None:
    schema = {"type": "integer"}
    assert check_schema(schema, True) != ()
    assert check_schema(schema, 1.5) != ()
    assert check_schema(schema, 2) == ()


def test_unknown_keywords_are_not_checked() -> None:
    assert check_schema({"anyOf": [{"type": "string"}], "type": "mystery"}, 1) == ()


def test_check_arguments_uses_the_schema_without_a_model() -> None:
    class Like:
        parameters = SCHEMA

    values, problems = check_arguments(Like(), {"n": 1})
    assert (values, problems) == ({"n": 1}, ())
    _, problems = check_arguments(Like(), {})
    assert format_problems(problems) == "field 'n': Field required"


def test_a_problem_without_a_field_names_the_arguments() -> None:
    assert str(FieldProblem("", "bad")) == "arguments: bad"


@pytest.mark.parametrize(
    "raw",
    [
        '{"a": 1}',
        "",
        "  ",
        "{}",
        "[1]",
        '"x"',
        '{"a": NaN}',
        '{"a": 1',
        "\ufeff{}",
        3,
        None,
        "1e999",
    ],
)
def test_parsed_object_is_parse_arguments_object_or_defers_to_it(raw: object) -> None:
    found = parsed_object(raw)
    assert found is None or found == parse_arguments(raw).arguments
    if parse_arguments(raw).arguments is None:
        assert found is None
