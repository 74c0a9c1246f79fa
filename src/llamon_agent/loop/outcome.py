"""``LoopOutcome``: how a run ended, what it produced on the way, and every failure.

``run_loop`` returns one instead of raising. ``status`` says how the run ended:

* ``"completed"`` -- ``answer`` holds the model's final text;
* ``"invalid_model_response"`` -- the model answered with neither a tool call nor text;
* ``"max_rounds_exceeded"`` -- the rounds ran out before a final answer;
* ``"model_error"`` -- the model call raised; ``classification`` holds the error code,
  reason, retriable flag (and ``retry_after_ms``) from ``core.classify``;
* ``"tool_escalated"`` -- a ``ToolLike``'s ``call`` raised instead of returning a
  failure (an MCP tool's third transport failure in one request); ``classification``
  as for ``model_error``, its exception the one raised.

Whatever the status, ``tool_results`` lists every tool call with its result, in order --
the partial results a caller can still show -- and ``failures`` holds a
``FailureRecord`` per failure (observations first as they happened, the terminal one
last, also available as ``terminal``).

``outcome_error(outcome)`` is the exception that tells a caller how a non-completed run
ended (what an A2A caller of ``LoopAgent`` receives):

==========================  ==========================================================
outcome                     exception (and so the A2A answer)
==========================  ==========================================================
``invalid_model_response``  ``LlamonApplicationError``: ``UPSTREAM_UNAVAILABLE`` /
                            ``invalid_model_response``, retriable
``max_rounds_exceeded``     ``LlamonApplicationError``: ``UPSTREAM_UNAVAILABLE`` /
                            ``max_rounds_exceeded``, retriable
``model_error``             ``LlamonApplicationError`` with the model exception's
                            classification: its code, reason, retriable,
                            ``retryAfterMs`` when known, ``retried`` (the adapter's
                            retries of the failing call); an unmapped exception shows
                            only an incident id. A ``LlamonApplicationError`` or
                            ``GuardrailBlockedError`` raised by the model is returned
                            unchanged.
``tool_escalated``          the tool's exception as it was raised
==========================  ==========================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

from pydantic_core import to_jsonable_python

from llamon_agent.core.classify import Classification
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.failures import FailureRecord
from llamon_agent.exceptions import GuardrailBlockedError, LlamonApplicationError
from llamon_agent.loop.model import ChatMessage, RawToolCall
from llamon_agent.loop.result import ToolResult

__all__ = ["LoopOutcome", "LoopStatus", "ToolCallResult", "outcome_error"]

LoopStatus: TypeAlias = Literal[
    "completed", "invalid_model_response", "max_rounds_exceeded", "model_error", "tool_escalated"
]


def _jsonable(value: object) -> object:
    try:
        return to_jsonable_python(value, fallback=str)
    except Exception:  # a value whose __str__ fails: never fail the answer over it
        return f"<{type(value).__name__} result>"


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    """One tool call as the model wrote it, the round it came in, and its result."""

    call: RawToolCall
    result: ToolResult
    round: int

    def to_dict(self) -> dict[str, object]:
        """JSON-ready, for an artifact: the value on success, the model's text on failure.

        Raw arguments are left out (they may hold what the user typed); failure text is
        the scrubbed line the model read.
        """
        data: dict[str, object] = {
            "tool_call_id": self.call.id,
            "tool": self.call.name,
            "round": self.round,
            "ok": not self.result.is_error,
        }
        if self.result.is_error:
            data["error_code"] = self.result.error_code
            data["message"] = self.result.to_model_text()
        else:
            data["value"] = _jsonable(self.result.value)
        return data


@dataclass(frozen=True, slots=True)
class LoopOutcome:
    """The end of a run (see the module docstring).

    ``classification`` is set for ``model_error`` and ``tool_escalated``.
    ``model_retries`` counts every retry the model adapter made in this run, those of a
    call that finally failed included.
    """

    status: LoopStatus
    answer: str | None
    transcript: tuple[ChatMessage, ...]
    tool_results: tuple[ToolCallResult, ...]
    failures: tuple[FailureRecord, ...]
    rounds: int
    model_retries: int
    run_id: str
    usage: Mapping[str, int] = field(default_factory=dict)
    classification: Classification | None = field(default=None, repr=False)

    @property
    def completed(self) -> bool:
        """True when the model gave a final answer."""
        return self.status == "completed"

    @property
    def terminal(self) -> FailureRecord | None:
        """The failure that ended the run; None when it completed."""
        return None if self.completed or not self.failures else self.failures[-1]


_SOURCE_LOCATOR: Final = re.compile(r"[\x21-\x7e]{1,100}")


def _terminal(outcome: LoopOutcome) -> FailureRecord:
    record = outcome.terminal
    if record is None:  # a non-completed outcome always ends with its terminal record
        return FailureRecord.of(outcome.status, stage="tool_loop")
    return record


def outcome_error(outcome: LoopOutcome, *, model_name: str | None = None) -> BaseException:
    """The exception that tells a caller how a non-completed run ended (see above).

    ``model_name``, when it is printable ASCII, becomes ``errorSource="llm:<name>"``.
    """
    record = _terminal(outcome)
    source: dict[str, object] = {}
    if isinstance(model_name, str) and _SOURCE_LOCATOR.fullmatch(model_name):
        source["errorSource"] = f"llm:{model_name}"
    if outcome.status == "tool_escalated" and outcome.classification is not None:
        return outcome.classification.exception
    if outcome.status == "model_error" and outcome.classification is not None:
        found = outcome.classification
        if isinstance(found.exception, LlamonApplicationError | GuardrailBlockedError):
            return found.exception
        extras: dict[str, object] = dict(source)
        if found.retry_after_ms is not None:
            extras["retryAfterMs"] = found.retry_after_ms
        if found.retried:
            extras["retried"] = found.retried
        incident = record.evidence.get("incident_id")
        if isinstance(incident, str):
            extras["incidentId"] = incident
        error = LlamonApplicationError(
            found.code, found.reason, message=record.message, retriable=found.retriable, **extras
        )
        error.__cause__ = found.exception
        return error
    if outcome.status == "invalid_model_response":
        return LlamonApplicationError(
            ErrorCode.UPSTREAM_UNAVAILABLE,
            "invalid_model_response",
            message=record.message,
            retriable=True,
            **source,
        )
    return LlamonApplicationError(
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "max_rounds_exceeded",
        message=record.message,
        retriable=True,
    )
