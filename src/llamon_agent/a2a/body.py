"""Reading a JSON-RPC request body within the limits, and naming what is wrong with it.

Every refusal here is a JSON-RPC error with ``ProtocolErrorData`` (``INVALID_INPUT``)
that names the limit or the field path, never a value:

* ``ambiguous_body_length`` (-32600): the request has both ``Content-Length`` and
  ``Transfer-Encoding``, so its end depends on who reads it (request smuggling).
* ``body_too_large`` (-32600): the body is over ``RequestLimits.max_body_bytes``. Bytes
  are counted as they arrive (chunked bodies too); reading stops at the first byte over.
* ``json_parse`` (-32700): the body is not UTF-8, or not JSON (``NaN`` and ``Infinity``,
  which Python's parser would take, are not JSON either).
* ``nesting_too_deep`` (-32602 under ``params``, else -32600): arrays and objects nest
  deeper than ``RequestLimits.max_depth``.
* ``invalid_unicode``: a lone UTF-16 surrogate escape (``params.lone_surrogate_refusal``).
* ``integer_out_of_range`` (-32602 under ``params``, else -32600): an integer outside
  the signed 64-bit range, which no store or client can be relied on to hold.

The body is parsed once; integers are checked by the parser as it reads them. The depth
and surrogate checks cost one scan of the raw body each (a count of ``{`` and ``[``, a
search for ``\\ud800``-``\\udfff`` escapes); only a body one of them flags is walked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from a2a.types import InvalidRequestError, JSONParseError
from a2a.utils.errors import ServerError
from starlette.datastructures import Headers
from starlette.requests import Request

from llamon_agent.a2a.params import field_refusal, find_lone_surrogate, usable_id
from llamon_agent.a2a.protocol import RequestLimits, protocol_error
from llamon_agent.core.codes import ErrorCode

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "ReadRequest",
    "ambiguous_length_refusal",
    "body_too_large",
    "parse_body",
    "read_body",
]

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

Refusal = tuple[str | int | None, ServerError]
"""The reply id (``None`` when unknown or unusable) and the error to answer with."""

_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_PATH_LEVELS: Final = 5
"""A depth refusal names the path down to this level (``params.message.metadata.<key>``,
``params.message.parts[0]``), not the client's keys further down."""


def ambiguous_length_refusal(headers: Headers) -> ServerError | None:
    """``ambiguous_body_length`` for a request with both Content-Length and
    Transfer-Encoding, else None."""
    if "transfer-encoding" in headers and "content-length" in headers:
        return protocol_error(
            InvalidRequestError,
            ErrorCode.INVALID_INPUT,
            "ambiguous_body_length",
            "Invalid request: it has both Content-Length and Transfer-Encoding headers, so "
            "its length is ambiguous; send exactly one of them.",
        )
    return None


def body_too_large(limits: RequestLimits) -> ServerError:
    """``body_too_large`` (-32600) naming ``limits.max_body_bytes``."""
    return protocol_error(
        InvalidRequestError,
        ErrorCode.INVALID_INPUT,
        "body_too_large",
        f"Invalid request: the body is larger than this agent accepts (at most "
        f"{limits.max_body_bytes} bytes).",
    )


async def read_body(request: Request, limits: RequestLimits) -> bytes | None:
    """The whole body, or None as soon as it is over ``limits.max_body_bytes``.

    A declared Content-Length over the limit is refused before a byte is read; otherwise
    bytes are counted as they arrive and reading stops at the first chunk over the limit.
    Raises starlette's ``ClientDisconnect`` when the client goes away mid-body.
    """
    limit = limits.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class ReadRequest(Request):
    """The request with its body already read and parsed: a2a-sdk's ``request.json()``
    gets the document checked here instead of reading (and parsing) the body again."""

    def __init__(self, request: Request, body: bytes, document: object) -> None:
        super().__init__(request.scope, request.receive)
        self._read_body = body
        self._document = document

    async def body(self) -> bytes:
        return self._read_body

    async def json(self) -> Any:
        return self._document


class _NotJSONConstant(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity``: Python reads them, JSON has no such thing."""


def _refuse_constant(name: str) -> object:
    raise _NotJSONConstant(name)


class _BigInteger(ValueError):
    """An integer literal outside the signed 64-bit range."""


def _checked_int(literal: str) -> int:
    """The parser's hook for integer literals: only one of 19+ characters can be out of
    range (a literal of thousands of digits raises ``ValueError`` in ``int`` itself)."""
    value = int(literal)
    if len(literal) > 18 and not INT64_MIN <= value <= INT64_MAX:
        raise _BigInteger(literal[:0])
    return value


_DECODER: Final = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_checked_int)


def _parse_error(problem: str) -> ServerError:
    return protocol_error(
        JSONParseError, ErrorCode.INVALID_INPUT, "json_parse", f"Parse error: {problem}."
    )


def _too_deep(limits: RequestLimits, path: str | None) -> ServerError:
    problem = (
        f"is nested more than {limits.max_depth} levels deep, the most this agent accepts "
        "(the request object is level 1)"
    )
    if path is None:
        return protocol_error(
            InvalidRequestError,
            ErrorCode.INVALID_INPUT,
            "nesting_too_deep",
            f"Invalid request: the body {problem}.",
        )
    return field_refusal(path, "nesting_too_deep", problem)


def parse_body(body: bytes, limits: RequestLimits) -> tuple[Any, Refusal | None]:
    """The parsed document, and the refusal for it if it breaks a rule (module doc)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None, (None, _parse_error("the body is not valid UTF-8, which JSON text must be"))
    try:
        document = _DECODER.decode(text)
    except RecursionError:
        return None, (None, _too_deep(limits, None))
    except json.JSONDecodeError as exc:  # its text says where, never what
        return None, (None, _parse_error(f"the body is not JSON: {exc}"))
    except _NotJSONConstant:
        return None, (None, _parse_error("NaN and Infinity are not JSON numbers"))
    except _BigInteger:  # rare: parsed again, plainly, to name the field
        return _big_integer_refusal(text)
    except ValueError:  # an integer literal with thousands of digits
        return None, (None, _out_of_range(None))
    if body.count(b"{") + body.count(b"[") > limits.max_depth:
        path = _deeper_than(document, limits.max_depth)
        if path is not None:
            return document, (usable_id(document), _too_deep(limits, path))
    if _SURROGATE_ESCAPE.search(body) is not None:
        problem = find_lone_surrogate(document)
        if problem is not None:
            return document, (usable_id(document), problem)
    return document, None


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _deeper_than(document: object, max_depth: int) -> str | None:
    """The path (down to ``_PATH_LEVELS``) of an array or object deeper than
    ``max_depth``, or None. Iterative: any depth Python's parser returned is walked."""
    stack: list[tuple[dict[str, Any] | list[Any], str, int]] = []
    if isinstance(document, dict | list):
        stack.append((document, "", 1))
    while stack:
        value, path, depth = stack.pop()
        if depth > max_depth:
            return path or "$"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(item, dict | list):
                child = _join(path, key) if depth < _PATH_LEVELS else path
                stack.append((item, child, depth + 1))
    return None


def _big_integer_refusal(text: str) -> tuple[Any, Refusal]:
    try:
        document = json.loads(text)
    except (RecursionError, ValueError):
        return None, (None, _out_of_range(None))
    return document, (usable_id(document), _out_of_range(_first_big_integer(document)))


def _first_big_integer(document: object) -> str | None:
    """The path of the first integer outside the signed 64-bit range, or None."""
    stack: list[tuple[object, str]] = [(document, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, int) and not isinstance(value, bool):
            if not INT64_MIN <= value <= INT64_MAX:
                return path or "$"
        elif isinstance(value, Mapping):
            members = [(item, _join(path, key)) for key, item in value.items()]
            stack.extend(reversed(members))  # so the first member is looked at first
        elif isinstance(value, list):
            stack.extend(reversed([(item, _join(path, i)) for i, item in enumerate(value)]))
    return None


def _out_of_range(path: str | None) -> ServerError:
    if path is None:
        return protocol_error(
            InvalidRequestError,
            ErrorCode.INVALID_INPUT,
            "integer_out_of_range",
            f"Invalid request: an integer in the body is beyond 64 bits (every integer must "
            f"be from {INT64_MIN} to {INT64_MAX}).",
        )
    problem = f"is beyond 64 bits: it must be an integer from {INT64_MIN} to {INT64_MAX}"
    return field_refusal(path, "integer_out_of_range", problem)
