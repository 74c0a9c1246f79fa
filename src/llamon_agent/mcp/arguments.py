"""Check a model's tool arguments against the tool's input JSON schema, on our side.

Only what a model gets wrong and can fix from one line is checked here: the arguments
are an object, every ``required`` field is present, and each top-level field has one of
its schema's JSON types (``type``, a list of types, or ``anyOf``/``oneOf`` alternatives,
local ``$ref``s followed). Anything finer (ranges, patterns, nested objects, enums) is
left to the server, whose own validation answers with an ``is_error`` result.

The answer is ``None`` (go ahead) or one short line for the model:

* ``Missing required argument: title`` (several: ``Missing required arguments: a, b``)
* ``Invalid argument type: quantity should be an integer, not a string``
* ``Invalid arguments: expected a JSON object, not an array``

Field names come from the schema or the model; values never appear in the text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

__all__ = ["check_arguments", "json_type_name"]

_JSON_TYPES: Final = frozenset(
    {"string", "integer", "number", "boolean", "object", "array", "null"}
)
_MAX_REF_DEPTH: Final = 8


def json_type_name(value: object) -> str:
    """The JSON type of a Python value as the model sent it (``bool`` is not a number)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


_ARTICLES: Final = {"integer": "an", "object": "an", "array": "an", "null": ""}


def _a(json_type: str) -> str:
    """``"an integer"``, ``"a string"``, ``"null"``: a type name as a sentence reads it."""
    article = _ARTICLES.get(json_type, "a")
    return f"{article} {json_type}" if article else json_type


def _matches(value: object, json_type: str) -> bool:
    actual = json_type_name(value)
    if json_type == "number":
        return actual in ("integer", "number")
    if json_type == "integer":
        # JSON has one number type: 3.0 is an integer to JSON Schema (and to pydantic).
        return actual == "integer" or (isinstance(value, float) and value.is_integer())
    return actual == json_type


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """Follow local ``$ref`` (``#/$defs/X``, ``#/definitions/X``); unknown refs -> ``{}``."""
    for _ in range(_MAX_REF_DEPTH):
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return schema
        if not ref.startswith("#/"):
            return {}
        node: Any = root
        for part in ref[2:].split("/"):
            node = node.get(part) if isinstance(node, Mapping) else None
        if not isinstance(node, Mapping):
            return {}
        schema = node
    return {}


def _allowed_types(schema: Mapping[str, Any], root: Mapping[str, Any]) -> list[str] | None:
    """The JSON types a field accepts, in schema order; ``None`` when it says nothing."""
    schema = _resolve(schema, root)
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared] if declared in _JSON_TYPES else None
    if isinstance(declared, list):
        names = [t for t in declared if isinstance(t, str) and t in _JSON_TYPES]
        return names if names and len(names) == len(declared) else None
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            found: list[str] = []
            for branch in branches:
                if not isinstance(branch, Mapping):
                    return None
                inner = _allowed_types(branch, root)
                if inner is None:  # one branch accepts anything we cannot name
                    return None
                found.extend(t for t in inner if t not in found)
            return found
    return None


def _missing(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> Iterator[str]:
    required = schema.get("required")
    if isinstance(required, list):
        for name in required:
            if isinstance(name, str) and name not in arguments:
                yield name


def check_arguments(schema: Mapping[str, Any], arguments: object) -> str | None:
    """``None`` if ``arguments`` pass the basic checks of ``schema``, else one line."""
    if not isinstance(arguments, Mapping):
        return f"Invalid arguments: expected a JSON object, not {_a(json_type_name(arguments))}"
    missing = list(_missing(schema, arguments))
    if len(missing) == 1:
        return f"Missing required argument: {missing[0]}"
    if missing:
        return f"Missing required arguments: {', '.join(missing)}"
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    for name, value in arguments.items():
        field = properties.get(name)
        if not isinstance(field, Mapping):
            continue  # unknown fields are the server's call (most ignore them)
        allowed = _allowed_types(field, schema)
        if allowed is None or any(_matches(value, t) for t in allowed):
            continue
        expected = " or ".join(_a(t) for t in allowed)
        actual = _a(json_type_name(value))
        return f"Invalid argument type: {name} should be {expected}, not {actual}"
    return None
