"""Secrets as the security boundary meets them: encoded, and carried by exceptions.

``cases()`` draws a secret (``secret_samples``), an encoding (plain, percent, base64, JSON
string escapes) and a carrier (how the encoded text rides in an exception or error).
``build(carrier, text)`` makes the exception; ``reveals(value, output)`` says whether
``output`` gives the secret back by any of those decodings.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from dataclasses import dataclass

import httpx
from a2a.types import InvalidParamsError
from a2a.utils.errors import ServerError
from hypothesis import strategies as st
from pydantic import BaseModel, StrictInt

from llamon_agent.exceptions import ComponentInvokeError
from tests._support.secret_strategies import SecretSample, secret_samples

__all__ = ["CARRIERS", "ENCODINGS", "Case", "build", "cases", "encode", "reveals"]

ENCODINGS = ("plain", "percent", "percent_safe", "base64", "json", "json_unicode")
CARRIERS = (
    "text",
    "args",
    "cause",
    "context",
    "note",
    "group",
    "server_error_data",
    "httpx_url",
    "httpx_header",
    "pydantic_input",
)


@dataclass(frozen=True)
class Case:
    """One secret, how it is encoded, and what carries it."""

    sample: SecretSample
    encoding: str
    carrier: str

    @property
    def text(self) -> str:
        return encode(self.sample.text, self.encoding)


def encode(text: str, encoding: str) -> str:
    """``text`` as a log line or an upstream answer might carry it."""
    if encoding == "percent":
        return urllib.parse.quote(text, safe="")
    if encoding == "percent_safe":
        return urllib.parse.quote(text, safe="/:=&?@ ")
    if encoding == "base64":
        return base64.b64encode(text.encode()).decode()
    if encoding == "json":
        return json.dumps(text)[1:-1]
    if encoding == "json_unicode":
        escaped = json.dumps(text)[1:-1]
        return "".join(f"\\u{ord(c):04x}" if c in "@:/" else c for c in escaped)
    return text


def cases() -> st.SearchStrategy[Case]:
    """Every secret kind x every encoding x every carrier."""
    return st.builds(Case, secret_samples(), st.sampled_from(ENCODINGS), st.sampled_from(CARRIERS))


class _Order(BaseModel):
    quantity: StrictInt


def _pydantic_error(text: str) -> Exception:
    try:
        _Order.model_validate({"quantity": text})
    except Exception as exc:  # pydantic's ValidationError, whose text repeats the input
        return exc
    raise AssertionError("validation passed")


def _httpx_status_error(text: str, *, in_header: bool) -> Exception:
    if in_header:
        request = httpx.Request("GET", "https://api.example/v1", headers={"X-Debug": text})
        response = httpx.Response(401, request=request, headers={"X-Echo": text})
    else:
        request = httpx.Request("GET", "https://api.example/v1/items", params={"q": text})
        response = httpx.Response(401, request=request)
    try:
        response.raise_for_status()
    except httpx.HTTPStatusError as exc:
        exc.add_note(f"request headers: {dict(request.headers)}")
        return exc
    raise AssertionError("no error")


def build(carrier: str, text: str) -> BaseException:
    """An exception that carries ``text`` the way ``carrier`` says."""
    if carrier == "args":
        return ConnectionError("lookup failed", text, {"detail": text})
    if carrier == "cause":
        caused = ComponentInvokeError("lookup failed")
        caused.__cause__ = RuntimeError(f"driver said {text}")
        return caused
    if carrier == "context":
        cleanup = RuntimeError("cleanup failed")
        cleanup.__context__ = ConnectionError(f"peer said {text}")
        return cleanup
    if carrier == "note":
        exc = ConnectionError("upstream closed")
        exc.add_note(f"while sending {text}")
        return exc
    if carrier == "group":
        return ExceptionGroup(
            f"2 failures ({text})", [ValueError(text), ConnectionError(f"lost {text}")]
        )
    if carrier == "server_error_data":
        return ServerError(
            error=InvalidParamsError(
                message=f"refused {text}",
                data={
                    "errorCode": "INVALID_INPUT",
                    "errorReason": "refused",
                    "errorMessage": text,
                    "extra": text,
                },
            )
        )
    if carrier == "httpx_url":
        return _httpx_status_error(text, in_header=False)
    if carrier == "httpx_header":
        return _httpx_status_error(text, in_header=True)
    if carrier == "pydantic_input":
        return _pydantic_error(text)
    return ComponentInvokeError(f"upstream said: {text} (retry later)")


_B64_RUN = re.compile(r"[A-Za-z0-9+/_\-]{8,}={0,2}")
_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def _decodings(output: str) -> list[str]:
    views = [output, urllib.parse.unquote(urllib.parse.unquote(output))]
    views.append(_UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), output))
    views.append(views[-1].replace("\\/", "/").replace('\\"', '"').replace("\\\\", "\\"))
    for run in _B64_RUN.findall(output):
        core = run.rstrip("=").replace("-", "+").replace("_", "/")
        for shift in range(4):  # a secret inside a longer run starts at any offset
            piece = core[shift:]
            try:
                decoded = base64.b64decode(piece[: len(piece) // 4 * 4] + "==")
            except ValueError:
                continue
            views.append(decoded.decode("utf-8", "replace"))
    return views


def reveals(value: str, output: str, *, context: str = "") -> bool:
    """True when ``output``, or any decoding of it, holds an 8-character piece of ``value``
    that the innocent ``context`` does not also hold."""
    window = min(8, len(value))
    pieces = {value[i : i + window] for i in range(len(value) - window + 1)}
    pieces = {piece for piece in pieces if piece not in context}
    return any(piece in view for view in _decodings(output) for piece in pieces)
