"""``ToolResult``: what a tool call produced -- a value, or a named failure the model reads.

A tool's result is a value, and so is its failure::

    ToolResult.ok({"sum": 3})
    ToolResult.failure("invalid_arguments", "field 'a': Input should be a valid integer")

The loop sends ``to_model_text()`` back to the model under the call's id. For a
failure that text is one short, actionable line, ``"<error_code>: <message>"``; it never
holds a traceback, an upstream URL or host, or the text of an exception the
classification table does not know (``ToolResult.from_exception`` keeps that text in the
server log behind an incident id).
A failure may carry the ``FailureRecord`` that logs, events and Quality Lab results keep.

A tool may return its own result type instead: anything with ``to_tool_result()`` (a
``ToolResultLike``, such as the MCP tools' output) is converted by ``ToolResult.of``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from pydantic_core import to_jsonable_python

from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import Stage
from llamon_agent.core.failures import FailureRecord
from llamon_agent.core.messages import public_message
from llamon_agent.core.scrub import scrub_public_text

__all__ = ["ToolResult", "ToolResultLike"]

_FAILURE_TEXT_LIMIT = 1000

_PLAIN_TYPES: Final = frozenset({str, int, float, bool, type(None), dict, list, tuple})
"""Types that cannot be a ``ToolResultLike``: ``ToolResult.of`` skips the protocol check
for them (an ``isinstance`` against a runtime protocol costs microseconds)."""


_FLAT_ITEMS: Final = frozenset({str, int, float, bool, type(None)})
"""Values ``json.dumps`` writes exactly as it writes what ``to_jsonable_python`` makes of them."""


def _flat(value: Any) -> bool:
    """True for a scalar of ``_FLAT_ITEMS``, or a dict (ASCII string keys) or list of them:
    a value ``to_jsonable_python`` would hand back unchanged."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not key.isascii() or type(item) not in _FLAT_ITEMS:
                return False
        return True
    if kind is list:
        return all(type(item) in _FLAT_ITEMS for item in value)
    return kind in _FLAT_ITEMS


def _render(value: Any) -> str:
    """A value as the text a model reads: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    if _flat(value):  # the common result, without a conversion pass that changes nothing
        return json.dumps(value, ensure_ascii=False)
    try:
        return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)
    except Exception:  # a value whose __str__ fails, a cycle: never fail the loop over it
        return f"<{type(value).__name__} result>"


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one tool call: ``value`` on success, ``error_code`` + ``message`` on failure.

    ``error_code`` is a reason string (``"invalid_arguments"``, ``"tool_error"``, or a
    tool's own such as ``"customer_not_found"``); ``None`` means success. ``record`` is the
    failure's ``FailureRecord`` when one was made.
    """

    value: Any = None
    error_code: str | None = None
    message: str = ""
    record: FailureRecord | None = None
    labelled: bool = True

    @classmethod
    def ok(cls, value: Any = None) -> ToolResult:
        """A successful result; the model reads ``value`` (a string as is, else as JSON)."""
        return cls(value=value)

    @classmethod
    def of(cls, value: Any) -> ToolResult:
        """What a tool's ``call`` returned, as a ``ToolResult``: a ``ToolResult`` as it is,
        a ``ToolResultLike`` converted by its ``to_tool_result()``, any other value
        ``ToolResult.ok(value)``."""
        if isinstance(value, ToolResult):
            return value
        if type(value) not in _PLAIN_TYPES and isinstance(value, ToolResultLike):
            value = value.to_tool_result()
            if isinstance(value, ToolResult):
                return value
        return cls.ok(value)

    @classmethod
    def failure(
        cls,
        error_code: str,
        message: str,
        *,
        record: FailureRecord | None = None,
        labelled: bool = True,
    ) -> ToolResult:
        """A failed result the model reads as ``"<error_code>: <message>"``.

        Write ``message`` for the model: say what was wrong and what to do instead. It is
        scrubbed (credentials, personal data, upstream URLs and hosts) before the model
        sees it. ``labelled=False``
        shows ``message`` alone (for texts fixed by a contract, such as the MCP
        normalizer's ``Missing required argument: <field>``).
        """
        if not error_code:
            raise ValueError("a failed ToolResult needs an error_code")
        return cls(error_code=error_code, message=message, record=record, labelled=labelled)

    @classmethod
    def from_exception(cls, exc: BaseException, *, tool: str) -> ToolResult:
        """The ``tool_error`` result for an exception a tool's handler raised. Never raises.

        The model reads ``Tool '<tool>' failed (<reason>): <text>`` for an exception the
        classification table maps (its text scrubbed, upstream URLs and hosts removed),
        and ``Tool '<tool>' failed (incident <id>).`` for any other: that exception's text
        and traceback stay in the server log under the incident id. The record (stage
        ``tool_loop``) carries the table's answer for a mapped exception -- its reason
        (``http_4xx``, ``rate_limited`` ...), code and retryable, with ``http_status`` and
        ``retry_after_ms`` in the evidence when known -- and reason ``tool_error`` (with
        the incident id) for an unmapped one.
        """
        found = classify_exception(exc)
        shown = public_message(found)
        if shown.incident_id is not None:
            message = f"Tool {tool!r} failed (incident {shown.incident_id})."
        else:
            message = f"Tool {tool!r} failed ({found.reason}): {shown.text}"
        evidence: dict[str, object] = {
            "exception_type": type(found.exception).__name__,
            "cause_reason": found.reason,
            "cause_code": found.code.value,
        }
        if shown.incident_id is not None:
            evidence["incident_id"] = shown.incident_id
        if found.retry_after_ms is not None:
            evidence["retry_after_ms"] = found.retry_after_ms
        if found.http_status is not None:
            evidence["http_status"] = found.http_status
        if found.mapped:
            record = FailureRecord.of(
                found.reason,
                message,
                stage=Stage.TOOL_LOOP,
                error_code=found.code,
                retryable=found.retriable,
                tool=tool,
                evidence=evidence,
            )
        else:
            record = FailureRecord.of("tool_error", message, tool=tool, evidence=evidence)
        return cls(error_code="tool_error", message=message, record=record)

    @property
    def is_error(self) -> bool:
        """True for a failure."""
        return self.error_code is not None

    def to_model_text(self) -> str:
        """The text the model reads for this result (see the module docstring)."""
        if self.error_code is None:
            return _render(self.value)
        message = scrub_public_text(self.message, max_length=_FAILURE_TEXT_LIMIT)
        if not self.labelled and message:
            return message
        return f"{self.error_code}: {message}" if message else self.error_code


@runtime_checkable
class ToolResultLike(Protocol):
    """A tool's own result type, which the loop turns into a ``ToolResult`` by calling
    ``to_tool_result()`` (the MCP tools' output is one). A ``ToolLike``'s ``call`` may
    return one instead of a ``ToolResult``; a failure it converts to keeps its record, or
    gets one naming the call."""

    def to_tool_result(self) -> ToolResult: ...
