"""The normalizer's fast paths give what the plain ones give: the argument check
remembered per shape of arguments (the walker's answer for every shape, a replaced schema
honoured) and the success output of one text block."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from typing import Any

import pytest
from mcp.types import CallToolResult, TextContent, Tool

from llamon_agent.loop.validation import first_schema_problem
from llamon_agent.mcp import McpToolOutput, RequestBudget, wrap_tool_output_normalizer

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "limit": {"type": "integer"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "price": {"type": "number"},
        "gift": {"type": "boolean"},
        "where": {"anyOf": [{"$ref": "#/$defs/Place"}, {"type": "null"}]},
        "tags": {"type": "array"},
        "code": {"type": ["string", "integer"]},
    },
    "required": ["title", "limit"],
    "additionalProperties": {"type": "string"},
    "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}},
}

VALUES: list[Any] = [None, True, 0, 3, 2.0, 2.5, "x", [], [1], {}, {"city": 1}, (1,), object()]
KEYS: list[Any] = ["title", "limit", "note", "price", "gift", "where", "tags", "code", "x", 1]


async def _ok(arguments: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text="ok")])


def test_every_shape_gets_the_walkers_answer_twice() -> None:
    tool = wrap_tool_output_normalizer(
        Tool(name="t", input_schema=SCHEMA), _ok, budget=RequestBudget()
    )
    rng = random.Random(4)  # noqa: S311 - a fixed seed: the same cases every run
    for _ in range(2000):
        arguments: Any = {k: rng.choice(VALUES) for k in rng.sample(KEYS, rng.randint(0, 6))}
        expected = first_schema_problem(SCHEMA, arguments)
        for _ in range(2):  # the first answer is the walker's, the second remembered
            output = asyncio.run(tool.call(arguments))
            if expected is None:
                assert not output.is_error, arguments
            else:
                assert (output.text, output.reason) == (expected, "invalid_arguments")


def test_new_parameters_are_checked_anew() -> None:
    tool = wrap_tool_output_normalizer(
        Tool(name="t", input_schema=SCHEMA), _ok, budget=RequestBudget()
    )
    arguments = {"title": "x", "limit": 1}
    assert not asyncio.run(tool.call(arguments)).is_error
    tool.parameters = {"type": "object", "required": ["isbn"]}
    output = asyncio.run(tool.call(arguments))
    assert (output.text, output.reason) == ("Missing required argument: isbn", "invalid_arguments")


def test_a_success_is_the_frozen_output_of_its_text_and_structure() -> None:
    result = CallToolResult(
        content=[TextContent(type="text", text="5")], structured_content={"result": 5}
    )

    async def five(arguments: dict[str, Any]) -> CallToolResult:
        return result

    tool = wrap_tool_output_normalizer(
        Tool(name="t", input_schema={}), five, budget=RequestBudget()
    )
    output = asyncio.run(tool.call({}))
    assert output == McpToolOutput(text="5", structured={"result": 5})
    assert (output.is_error, output.reason) == (False, None)
    assert repr(output) == repr(McpToolOutput(text="5", structured={"result": 5}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        output.text = "6"  # type: ignore[misc]
