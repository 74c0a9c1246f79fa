"""Message policy: which text of an exception may leave the process.

* A mapped exception (any row of the table) -> its text, scrubbed. Empty text gives a
  plain sentence naming the type. Rows marked "text withheld" (provider SDK errors, whose
  text echoes API keys and prompts) give the code's plain sentence instead.
* A row with a message of the SDK's own (a recursion limit, a called agent's JSON-RPC
  error) -> that message.
* An unmapped exception (the INTERNAL_ERROR fallback) -> a generic message with an
  incident id. The same id is logged at ERROR on ``llamon_agent.errors`` with the
  traceback, so an operator can find the cause. The exception's own text reaches
  clients only while ``LLAMON_DEBUG_ERRORS`` is on (and is scrubbed even then).

Whatever text is shown, no upstream location leaves the process: URLs, ``host:port``
pairs, IP addresses and host names are removed (``core.scrub.scrub_public_text``); the
incident line's traceback loses them too (``core.scrub.scrub_log_text``), so a log line
names no backend either.

The rule is deliberate: ``str(exc)`` never becomes ``errorMessage`` as such, because raw
exception text is where secrets leak (connection strings, tokens in URLs, SQL values).
"""

from __future__ import annotations

import contextlib
import linecache
import logging
import secrets
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Final

from llamon_agent.core.classify import Classification
from llamon_agent.core.codes import DEFAULT_MESSAGES
from llamon_agent.core.scrub import (
    ScrubbedText,
    incident_message,
    scrub_log_text,
    scrub_public_text,
)
from llamon_agent.core.settings import debug_errors_enabled

__all__ = ["PublicMessage", "incident_id_for", "public_message", "safe_str"]

logger = logging.getLogger("llamon_agent.errors")

_INCIDENT_ATTR = "__llamon_incident_id__"
_MAX_LINE: Final = 20_000
"""The incident line's length limit (the log-record scrubbing's too)."""


@dataclass(frozen=True, slots=True)
class PublicMessage:
    """Text that may be shown to a client, and the incident id when one was logged."""

    text: str
    incident_id: str | None = None


def incident_id_for(exc: BaseException) -> str:
    """The incident id of ``exc``: made and logged (with traceback) once per exception."""
    existing = getattr(exc, _INCIDENT_ATTR, None)
    if isinstance(existing, str):
        return existing
    incident = secrets.token_hex(6)
    with contextlib.suppress(AttributeError, TypeError):  # exceptions with __slots__
        setattr(exc, _INCIDENT_ATTR, incident)
    if not logger.isEnabledFor(logging.ERROR):
        return incident  # nobody reads the line: no traceback to format
    try:
        trace = _formatted_traceback(exc)
    except Exception:
        trace = type(exc).__name__
    # The traceback is scrubbed too: log lines are outside the security boundary's reach.
    # Every part of the line is scrubbed here, so the log-record scrubbing keeps it as is
    # (a line over its length limit is left to it, which cuts it as before).
    name = scrub_log_text(type(exc).__name__)
    line = f"incident {incident}: unmapped {name}\n{scrub_log_text(trace, max_length=_MAX_LINE)}"
    logger.error(ScrubbedText(line) if len(line) <= _MAX_LINE else line)
    return incident


_FRAME_CACHE_MAX: Final = 4096
_FRAME_CACHE_LINES: Final = 8
_frame_texts: dict[tuple[object, ...], str] = {}


class _RememberedFrames(traceback.StackSummary):
    """A ``StackSummary`` that formats each source position once: the text of a frame is
    ``StackSummary.format_frame_summary``'s (location, source line, caret line), kept per
    file, line span, columns, function name and source lines, so a failure at a known
    place does not parse its source lines again for the caret anchors."""

    def format_frame_summary(self, frame_summary: traceback.FrameSummary, **kwargs: Any) -> str:
        """The frame's text, as ``StackSummary`` formats it."""
        key = _frame_key(frame_summary) if not kwargs else None
        if key is None:
            return super().format_frame_summary(frame_summary, **kwargs)
        text = _frame_texts.get(key)
        if text is None:
            text = super().format_frame_summary(frame_summary)
            if len(_frame_texts) >= _FRAME_CACHE_MAX:
                _frame_texts.clear()
            _frame_texts[key] = text
        return text


def _frame_key(frame: traceback.FrameSummary) -> tuple[object, ...] | None:
    """What a frame's text depends on, or None when it is not worth remembering (locals
    shown, no line number, a long multi-line span)."""
    lineno = frame.lineno
    if frame.locals is not None or lineno is None:
        return None
    end = getattr(frame, "end_lineno", None) or lineno
    if end - lineno >= _FRAME_CACHE_LINES:
        return None
    source = tuple(linecache.getline(frame.filename, n) for n in range(lineno, end + 1))
    return (
        frame.filename,
        lineno,
        getattr(frame, "end_lineno", None),
        getattr(frame, "colno", None),
        getattr(frame, "end_colno", None),
        frame.name,
        source,
    )


_STACK_CACHE_MAX: Final = 1024
_STACK_CACHE_FRAMES: Final = 256
_stack_texts: dict[tuple[object, ...], str] = {}


def _formatted_traceback(exc: BaseException) -> str:
    """``"".join(traceback.format_exception(exc))``, the same text, made cheaply: the stack
    of an exception without a chain (no cause, no shown context, not a group) is formatted
    once per sequence of code positions; other frames once per source position
    (``_RememberedFrames``)."""
    key = _stack_key(exc)
    if key is None:
        return _format_chain(exc)
    stack = _stack_texts.get(key)
    if stack is None:
        extracted = traceback.TracebackException(
            type(exc), exc, exc.__traceback__, compact=True
        ).stack
        extracted.__class__ = _RememberedFrames
        stack = "".join(extracted.format())
        if len(_stack_texts) >= _STACK_CACHE_MAX:
            _stack_texts.clear()
        _stack_texts[key] = stack
    head = f"Traceback (most recent call last):\n{stack}" if stack else ""
    return head + _exception_line(exc)


_DIRECT_EXCEPTION_LINE: Final = sys.version_info < (3, 12)
"""The line ``_exception_line`` makes is 3.11's ``format_exception_only``'s (later versions
format it themselves)."""


def _exception_line(exc: BaseException) -> str:
    """``"".join(traceback.format_exception_only(exc))``: on Python 3.11 made directly for
    an exception without notes that is no ``SyntaxError`` (one line: the type, then its
    text), without building a ``TracebackException``."""
    cls = type(exc)
    if (
        not _DIRECT_EXCEPTION_LINE
        or issubclass(cls, SyntaxError)
        or getattr(exc, "__notes__", None) is not None
    ):
        return "".join(traceback.format_exception_only(exc))
    name = cls.__qualname__
    module = cls.__module__
    if module not in ("__main__", "builtins"):
        name = f"{module if isinstance(module, str) else '<unknown>'}.{name}"
    try:
        text = str(exc)
    except BaseException:  # as traceback does: any failure of __str__
        text = "<exception str() failed>"
    return f"{name}: {text}\n" if text else f"{name}\n"


def _stack_key(exc: BaseException) -> tuple[object, ...] | None:
    """The code positions of ``exc``'s traceback (and the traceback limit), or None when
    its text has more than one stack (a cause, a shown context, a group) or a long one."""
    if exc.__cause__ is not None or isinstance(exc, BaseExceptionGroup):
        return None
    if exc.__context__ is not None and not exc.__suppress_context__:
        return None
    positions: list[object] = [getattr(sys, "tracebacklimit", None)]
    tb = exc.__traceback__
    while tb is not None:
        if len(positions) > _STACK_CACHE_FRAMES:
            return None
        positions.append((tb.tb_frame.f_code, tb.tb_lasti))
        tb = tb.tb_next
    return tuple(positions)


def _format_chain(exc: BaseException) -> str:
    """``"".join(traceback.format_exception(exc))`` for any exception, its frames formatted
    once per source position."""
    top = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    pending = [top]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if type(current.stack) is traceback.StackSummary:
            current.stack.__class__ = _RememberedFrames
        pending.extend(
            nested
            for nested in (current.__cause__, current.__context__, *(current.exceptions or ()))
            if nested is not None
        )
    return "".join(top.format())


def safe_str(exc: BaseException) -> str:
    """``str(exc)``, or "" when the exception's ``__str__`` itself fails."""
    try:
        return str(exc)
    except Exception:
        return ""


def public_message(classification: Classification) -> PublicMessage:
    """The client-safe message for a classified exception (see the module docstring)."""
    exc = classification.exception
    if classification.message is not None:
        return PublicMessage(classification.message)
    if classification.mapped and not classification.expose_text:
        return PublicMessage(DEFAULT_MESSAGES[classification.code])
    raw = safe_str(exc)
    if classification.mapped:
        return PublicMessage(scrub_public_text(raw) if raw else f"{type(exc).__name__} was raised.")
    incident = incident_id_for(exc)
    text = incident_message(incident)
    if debug_errors_enabled() and raw:
        text = f"{text} {type(exc).__name__}: {scrub_public_text(raw)}"
    return PublicMessage(text, incident)
