"""Check a model's tool arguments against the tool's input JSON schema, on our side.

The check is the loop's one JSON-schema walker (``llamon_agent.loop.validation``) in its
short style for MCP tools: only what a model gets wrong and can fix from one line -- the
arguments are an object, every ``required`` field is present, and each top-level field
has one of its schema's JSON types (``type``, a list of types, or ``anyOf``/``oneOf``
alternatives, local ``$ref``s followed). Anything finer (ranges, patterns, nested
objects, enums) is left to the server, whose own validation answers with an ``is_error``
result.

The answer is ``None`` (go ahead) or one short line for the model:

* ``Missing required argument: title`` (several: ``Missing required arguments: a, b``)
* ``Invalid argument type: quantity should be an integer, not a string``
* ``Invalid arguments: expected a JSON object, not an array``

Field names come from the schema or the model; values never appear in the text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llamon_agent.loop.validation import first_schema_problem, json_type_name

__all__ = ["check_arguments", "json_type_name"]


def check_arguments(schema: Mapping[str, Any], arguments: object) -> str | None:
    """``None`` if ``arguments`` pass the basic checks of ``schema``, else one line
    (``loop.validation.first_schema_problem``)."""
    return first_schema_problem(schema, arguments)
