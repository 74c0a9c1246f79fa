"""Argument checks at the loop boundary: parse the model's JSON, then hold it to the contract.

Two steps, two named failures:

* ``parse_arguments(raw)`` -- the raw ``arguments_json`` string must be a JSON object
  (``malformed_arguments`` otherwise). An empty string counts as ``{}``: some models send
  it for tools without parameters.
* ``check_arguments(tool, arguments)`` -- the object must fit the tool's contract
  (``invalid_arguments`` otherwise): its pydantic model when it has one (``Tool``), else
  a JSON-schema check of its ``parameters``. Each problem names its field; values are
  never repeated back.

The JSON-schema check is one walker (types -- a type, a list of types, or
``anyOf``/``oneOf`` alternatives --, required fields, enums, ``additionalProperties``,
nested objects and arrays, local ``$ref``s followed; other keywords are not checked here)
with two message styles:

* ``check_schema`` -- every problem, in pydantic's words (``field 'items[1].name': Field
  required``), for the loop's ``invalid_arguments`` observation;
* ``first_schema_problem`` -- one short line for a model calling an MCP tool, about the
  top-level fields only (finer checks are the server's):
  ``Missing required argument: title`` (several: ``Missing required arguments: a, b``),
  ``Invalid argument type: quantity should be an integer, not a string``,
  ``Invalid arguments: expected a JSON object, not an array``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ValidationError

from llamon_agent.core.validation_errors import error_path, validation_problems

__all__ = [
    "ArgumentsParse",
    "FieldProblem",
    "check_arguments",
    "check_schema",
    "first_schema_problem",
    "format_problems",
    "json_type_name",
    "parse_arguments",
    "parsed_object",
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


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
"""``json.loads(raw, parse_constant=_reject_constant)`` without building a decoder per call."""


def parse_arguments(raw: object) -> ArgumentsParse:
    """Parse a raw ``arguments_json``; ``arguments`` is None when it is not a JSON object."""
    if not isinstance(raw, str):
        return ArgumentsParse(None, f"not a JSON string (got {type(raw).__name__})", "not_a_string")
    if not raw.strip():
        return ArgumentsParse({})
    try:
        if raw.startswith("\ufeff"):  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", raw, 0)
        value = _DECODER.decode(raw)
    except json.JSONDecodeError as exc:
        return ArgumentsParse(None, f"not valid JSON ({exc.msg} at char {exc.pos})", "json")
    except (ValueError, RecursionError) as exc:
        detail = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
        return ArgumentsParse(None, f"not valid JSON ({detail})", "json")
    if not isinstance(value, dict):
        return ArgumentsParse(None, f"not a JSON object (got {_json_type(value)})", "not_an_object")
    return ArgumentsParse(value)


def parsed_object(raw: object) -> dict[str, Any] | None:
    """The arguments object of ``raw`` when ``parse_arguments`` would find one, without its
    ``ArgumentsParse``; None when it might not (ask ``parse_arguments`` why)."""
    if type(raw) is not str or raw.startswith("\ufeff"):
        return None
    if not raw.strip():
        return {}
    try:
        value = _DECODER.decode(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _json_type(value: object) -> str:
    """JSON's own name: one ``number`` type for integers and fractions alike."""
    name = json_type_name(value)
    return "number" if name == "integer" else name


def problems_from_validation_error(exc: ValidationError) -> tuple[FieldProblem, ...]:
    """One ``FieldProblem`` per pydantic error: its field path and message (no input values)."""
    return tuple(FieldProblem(path, message) for path, message in validation_problems(exc))


def json_type_name(value: object) -> str:
    """The JSON Schema type of a Python value as the model sent it (``bool`` is not a
    number; ``3`` is an ``integer``, ``3.5`` a ``number``)."""
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


_JSON_TYPES: Final = frozenset(
    {"string", "integer", "number", "boolean", "object", "array", "null"}
)
_MAX_REF_DEPTH: Final = 8
_MAX_ENUM_SHOWN: Final = 10


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
    if "$ref" not in schema:  # the common case, on every field of every call
        return schema
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
    """The JSON types a value may have, in schema order; ``None`` when the schema says
    nothing we can name (no type, an unknown type name, an untyped alternative)."""
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


Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class _Finding:
    """One problem the walker found, before it is put into words.

    ``kind`` says which rule broke: ``type`` (``expected`` JSON types, the value's
    ``actual`` type), ``enum`` (``expected`` the allowed values, as JSON), ``missing`` (a
    required field), ``extra`` (a field ``additionalProperties: false`` forbids).
    """

    path: Path
    kind: Literal["type", "enum", "missing", "extra"]
    expected: tuple[str, ...] = ()
    actual: str = ""


def _walk(
    schema: Mapping[str, Any],
    value: object,
    path: Path,
    root: Mapping[str, Any],
    depth: int | None = None,
) -> Iterator[_Finding]:
    """Every problem of ``value`` against ``schema``: the one JSON-schema walker.

    With ``depth``, a value that deep is only type-checked (nothing below it is walked).
    """
    schema = _resolve(schema, root)
    allowed = _allowed_types(schema, root)
    if allowed and not any(_matches(value, t) for t in allowed):
        yield _Finding(path, "type", tuple(allowed), json_type_name(value))
        return
    if depth is not None and len(path) >= depth:
        return
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        yield _Finding(path, "enum", tuple(json.dumps(item) for item in enum))
    if isinstance(value, Mapping):
        yield from _walk_object(schema, value, path, root, depth)
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, Mapping):
        for index, item in enumerate(value):
            yield from _walk(items, item, (*path, index), root, depth)


def _walk_object(
    schema: Mapping[str, Any],
    value: Mapping[str, Any],
    path: Path,
    root: Mapping[str, Any],
    depth: int | None,
) -> Iterator[_Finding]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    for name in required if isinstance(required, list) else ():
        if isinstance(name, str) and name not in value:
            yield _Finding((*path, name), "missing")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        sub = properties.get(key)
        if isinstance(sub, Mapping):
            yield from _walk(sub, item, (*path, str(key)), root, depth)
        elif extra is False:
            yield _Finding((*path, str(key)), "extra")
        elif isinstance(extra, Mapping):
            yield from _walk(extra, item, (*path, str(key)), root, depth)


def _valid_types(types: Sequence[str]) -> str:
    """``"a valid integer"``, ``"a valid string or null"`` (pydantic's wording)."""
    named = [t for t in types if t != "null"]
    text = f"a valid {' or '.join(named)}" if named else "null"
    return f"{text} or null" if named and "null" in types else text


def _in_pydantic_words(finding: _Finding) -> FieldProblem:
    where = error_path(finding.path)
    if finding.kind == "type":
        return FieldProblem(where, f"Input should be {_valid_types(finding.expected)}")
    if finding.kind == "enum":
        shown = ", ".join(finding.expected[:_MAX_ENUM_SHOWN])
        more = ", ..." if len(finding.expected) > _MAX_ENUM_SHOWN else ""
        return FieldProblem(where, f"Input should be one of {shown}{more}")
    if finding.kind == "missing":
        return FieldProblem(where, "Field required")
    return FieldProblem(where, "Extra inputs are not permitted")


def check_schema(schema: Mapping[str, Any], value: Any, path: str = "") -> tuple[FieldProblem, ...]:
    """Every problem of ``value`` against a JSON schema, in pydantic's words (the keywords
    named in the module docstring); ``path`` prefixes each field."""
    problems = tuple(_in_pydantic_words(f) for f in _walk(schema, value, (), schema))
    if not path:
        return problems
    return tuple(FieldProblem(_under(path, p.field), p.message) for p in problems)


def _under(prefix: str, field: str) -> str:
    if not field:
        return prefix
    return f"{prefix}{field}" if field.startswith("[") else f"{prefix}.{field}"


_ARTICLES: Final = {"integer": "an", "object": "an", "array": "an", "null": ""}


def _a(json_type: str) -> str:
    """``"an integer"``, ``"a string"``, ``"null"``: a type name as a sentence reads it."""
    article = _ARTICLES.get(json_type, "a")
    return f"{article} {json_type}" if article else json_type


def first_schema_problem(schema: Mapping[str, Any], arguments: object) -> str | None:
    """``None`` if ``arguments`` pass the top-level checks of ``schema``, else one line.

    The checks are the walker's, kept to what a model gets wrong and can fix from one
    line: the arguments are an object, every ``required`` field is present, and each
    declared top-level field has one of its schema's JSON types. Field names come from
    the schema or the model; values never appear in the text.
    """
    if not isinstance(arguments, Mapping):
        return f"Invalid arguments: expected a JSON object, not {_a(json_type_name(arguments))}"
    declared = _resolve(schema, schema).get("properties")
    declared = declared if isinstance(declared, Mapping) else {}
    top = [f for f in _walk(schema, arguments, (), schema, depth=1) if len(f.path) == 1]
    missing = [str(f.path[0]) for f in top if f.kind == "missing"]
    if len(missing) == 1:
        return f"Missing required argument: {missing[0]}"
    if missing:
        return f"Missing required arguments: {', '.join(missing)}"
    for finding in top:
        name = str(finding.path[0])
        if finding.kind == "type" and name in declared:
            expected = " or ".join(_a(t) for t in finding.expected)
            return f"Invalid argument type: {name} should be {expected}, not {_a(finding.actual)}"
    return None


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
            validated = model.__pydantic_validator__.validate_python(dict(arguments))
        except ValidationError as exc:
            return {}, problems_from_validation_error(exc)
        fields = type(validated).__pydantic_fields__  # (model_fields, without its descriptor)
        return {name: getattr(validated, name) for name in fields}, ()
    schema = getattr(tool, "parameters", None)
    if not isinstance(schema, Mapping):
        return dict(arguments), ()
    return dict(arguments), check_schema(schema, dict(arguments))


def format_problems(problems: Sequence[FieldProblem]) -> str:
    """``"field 'a': Input should be a valid integer; field 'b': Field required"``."""
    return "; ".join(str(problem) for problem in problems)
