"""An MCP tool remembers its argument check per shape of arguments: same answers as the
walker for every shape, the schema's replacement honoured."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from mcp.types import CallToolResult, TextContent, Tool

from llamon_agent.loop.validation import first_schema_problem
from llamon_agent.mcp import RequestBudget, wrap_tool_output_normalizer

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
