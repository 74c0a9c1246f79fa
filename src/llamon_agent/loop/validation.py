"""Argument checks at the loop boundary: parse the model's JSON, then hold it to the contract.

Two steps, two named failures:

* ``parse_arguments(raw)`` -- the raw ``arguments_json`` string must be a JSON object
  (``malformed_arguments`` otherwise). An empty string counts as ``{}``: some models send
  it for tools without parameters.
* ``check_arguments(tool, arguments)`` -- the object must fit the tool's contract
  (``invalid_arguments`` otherwise): its pydantic model when it has one (``Tool``), else
  a JSON-schema check of its ``parameters`` (types, required fields, enums,
  ``additionalProperties: false``, nested objects and arrays; other keywords are not
  checked here). Each problem names its field; values are never repeated back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from llamon_agent.core.validation_errors import validation_problems

__all__ = [
    "ArgumentsParse",
    "FieldProblem",
    "check_arguments",
    "check_schema",
    "format_problems",
    "parse_arguments",
    "problems_from_validation_error",
]


@dataclass(frozen=True, slots=True)
class FieldProblem:
    """One field that broke the contract: its path (``"a"``, ``"items[0].name"``) and why."""

    field: str
    message: str

    def __str__(self) -> str:
        where = f"field {self.field!r}" if self.field else "arguments"
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class ArgumentsParse:
    """The result of ``parse_arguments``: the object, or why the text is not one.

    ``problem`` reads after "the arguments are": ``"not valid JSON (...)"``, ``"not a
    JSON object (got array)"``; ``error_type`` is ``json``, ``not_an_object`` or
    ``not_a_string``.
    """

    arguments: dict[str, Any] | None
    problem: str = ""
    error_type: str = ""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_arguments(raw: object) -> ArgumentsParse:
    """Parse a raw ``arguments_json``; ``arguments`` is None when it is not a JSON object."""
    if not isinstance(raw, str):
        return ArgumentsParse(None, f"not a JSON string (got {type(raw).__name__})", "not_a_string")
    if not raw.strip():
        return ArgumentsParse({})
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return ArgumentsParse(None, f"not valid JSON ({exc.msg} at char {exc.pos})", "json")
    except (ValueError, RecursionError) as exc:
        detail = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
        return ArgumentsParse(None, f"not valid JSON ({detail})", "json")
    if not isinstance(value, dict):
        return ArgumentsParse(None, f"not a JSON object (got {_json_type(value)})", "not_an_object")
    return ArgumentsParse(value)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def problems_from_validation_error(exc: ValidationError) -> tuple[FieldProblem, ...]:
    """One ``FieldProblem`` per pydantic error: its field path and message (no input values)."""
    return tuple(FieldProblem(path, message) for path, message in validation_problems(exc))


_TYPE_CHECKS: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (
        not isinstance(v, bool)
        and (isinstance(v, int) or (isinstance(v, float) and math.isfinite(v) and v.is_integer()))
    ),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}
_MAX_ENUM_SHOWN = 10


def _valid_types(types: Sequence[str]) -> str:
    """``"a valid integer"``, ``"a valid string or null"`` (pydantic's wording)."""
    named = [t for t in types if t != "null"]
    text = f"a valid {' or '.join(named)}" if named else "null"
    return f"{text} or null" if named and "null" in types else text


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def check_schema(schema: Mapping[str, Any], value: Any, path: str = "") -> tuple[FieldProblem, ...]:
    """Problems of ``value`` against a JSON schema (the subset named in the module docstring)."""
    problems: list[FieldProblem] = []
    declared = schema.get("type")
    types = [declared] if isinstance(declared, str) else declared
    if isinstance(types, list):
        known = [t for t in types if t in _TYPE_CHECKS]
        if known and not any(_TYPE_CHECKS[t](value) for t in known):
            return (FieldProblem(path, f"Input should be {_valid_types(known)}"),)
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        shown = ", ".join(json.dumps(item) for item in enum[:_MAX_ENUM_SHOWN])
        more = ", ..." if len(enum) > _MAX_ENUM_SHOWN else ""
        problems.append(FieldProblem(path, f"Input should be one of {shown}{more}"))
    if isinstance(value, dict):
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        for name in required if isinstance(required, list) else ():
            if isinstance(name, str) and name not in value:
                problems.append(FieldProblem(_join(path, name), "Field required"))
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            sub = properties.get(key)
            if isinstance(sub, Mapping):
                problems.extend(check_schema(sub, item, _join(path, str(key))))
            elif extra is False:
                problems.append(
                    FieldProblem(_join(path, str(key)), "Extra inputs are not permitted")
                )
            elif isinstance(extra, Mapping):
                problems.extend(check_schema(extra, item, _join(path, str(key))))
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, Mapping):
        for index, item in enumerate(value):
            problems.extend(check_schema(items, item, f"{path}[{index}]"))
    return tuple(problems)


def check_arguments(
    tool: object, arguments: Mapping[str, Any]
) -> tuple[dict[str, Any], tuple[FieldProblem, ...]]:
    """``(arguments for the handler, problems)`` for a parsed arguments object.

    A tool with a pydantic ``args_model`` is validated by it and gets the validated
    values (``"3"`` becomes ``3`` for an ``int``); any other tool is checked against its
    JSON-schema ``parameters`` and gets the arguments as they were.
    """
    model = getattr(tool, "args_model", None)
    if isinstance(model, type) and issubclass(model, BaseModel):
        try:
            validated = model.model_validate(dict(arguments))
        except ValidationError as exc:
            return {}, problems_from_validation_error(exc)
        return {name: getattr(validated, name) for name in type(validated).model_fields}, ()
    schema = getattr(tool, "parameters", None)
    if not isinstance(schema, Mapping):
        return dict(arguments), ()
    return dict(arguments), check_schema(schema, dict(arguments))


def format_problems(problems: Sequence[FieldProblem]) -> str:
    """``"field 'a': Input should be a valid integer; field 'b': Field required"``."""
    return "; ".join(str(problem) for problem in problems)
