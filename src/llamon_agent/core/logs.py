"""Log lines pass the security boundary too.

Our own log lines are scrubbed where they are written. Libraries underneath are not: a2a-sdk
logs request bodies at DEBUG and pydantic validation errors (with the offending input) on
a bad request, sse_starlette logs every SSE chunk at DEBUG, uvicorn and httpx log URLs,
database drivers log connection parameters. ``install_log_scrubbing()`` wraps the
log-record factory so that every record of every logger (except the pre-scrubbed
``llamon_agent.failures``) is scrubbed when it is created -- message, arguments and
traceback -- whatever handlers are configured: secrets and personal data are redacted,
and upstream locations (URLs, ``host:port``, IP addresses, host names) are removed as
from a client's message (``core.scrub.scrub_log_text``; a traceback's source lines keep
their dotted names). uvicorn's "Uvicorn running on ..." line keeps the address the
server listens on. The server installs it; ``LLAMON_SCRUB_LOGS=0`` turns it off.

A record keeps its shape, so other libraries' formatters still work (uvicorn's access
formatter unpacks its five arguments): a record with nothing to scrub is left untouched;
otherwise each argument is scrubbed in place (``args`` stays a tuple of the same length,
numbers stay numbers) and, only when a secret spans arguments or sits in the format string,
the message becomes the scrubbed text with ``args = ()``. A message built only from
scrubbed text (``core.scrub.ScrubbedText``, without arguments: the incident line) is not
scrubbed again. A traceback becomes its scrubbed
text in ``exc_text`` (``exc_info`` is dropped), which every ``logging.Formatter`` prints.

``TextLogFormatter`` and ``JsonLogFormatter`` are what ``llamon serve --log-format`` uses:
one line per record, UTC times; the JSON line carries a record's structured fields
(``LOG_FIELDS``), so a failed task's line has its task id, errorCode, reason, stage and
incident id as keys.
"""

from __future__ import annotations

import contextvars
import json
import logging
import traceback
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from llamon_agent.core.failures import FailureRecord
from llamon_agent.core.scrub import ScrubbedText, scrub_log_text, scrub_text
from llamon_agent.core.settings import scrub_logs_enabled

__all__ = [
    "LOG_FIELDS",
    "PRE_SCRUBBED_LOGGERS",
    "SCRUBBED_LOGGERS",
    "JsonLogFormatter",
    "TextLogFormatter",
    "failure_log_fields",
    "install_log_scrubbing",
    "log_scrubbing_installed",
    "withhold_http_library_lines",
]

SCRUBBED_LOGGERS: Final = ("",)
"""Logger name prefixes whose records are scrubbed: ``""``, every logger -- a2a-sdk,
uvicorn, starlette, sse_starlette (which logs every SSE chunk at DEBUG), httpx, httpcore,
mcp, asyncpg, sqlalchemy, aiosqlite, langgraph and whatever else a server imports --
except ``PRE_SCRUBBED_LOGGERS``."""

PRE_SCRUBBED_LOGGERS: Final = ("llamon_agent.failures",)
"""Loggers whose lines are built only from scrubbed values (``FailureRecord.to_dict()``)."""

_MAX_LINE: Final = 20_000
_SCRUB_FAILED: Final = "[REDACTED:log_scrub_failed]"
_KEPT_TYPES: Final = (int, float, bool, type(None))
"""Argument types kept as they are (``%d`` needs a number; a formatter may need the int)."""
_installed = False

_Scrub = Callable[..., str]
_LISTEN_LOGGER: Final = "uvicorn.error"
_LISTEN_LINE: Final = "Uvicorn running on "
"""uvicorn's line naming the address this server listens on -- the operator's own
setting, and the only place a server started on port 0 shows its port: it keeps that
address (secrets are still scrubbed). Every other line loses its locations."""

_HTTP_LIBRARY_LOGGERS: Final = (
    "httpx",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
)
_WITHHELD: Final = contextvars.ContextVar("llamon_http_lines_withheld", default=False)


class _WithheldHttpLines(logging.Filter):
    """Drops httpx's and httpcore's lines in a context that asked for it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _WITHHELD.get()


def withhold_http_library_lines() -> None:
    """Drop httpx's and httpcore's log lines from here on in the current context (an
    ``asyncio`` task's own context: a webhook delivery, a health probe). Their lines name
    the URL and host of each request, a backend address the logs must not carry; the
    caller logs what happened in its own words. Other tasks' lines are untouched."""
    for name in _HTTP_LIBRARY_LOGGERS:
        library = logging.getLogger(name)
        if not any(isinstance(f, _WithheldHttpLines) for f in library.filters):
            library.addFilter(_WithheldHttpLines())
    _WITHHELD.set(True)


class _ScrubbedArg:
    """Stands in for an argument that is not a string or number: its ``str()`` and
    ``repr()`` are the scrubbed ``str()`` and ``repr()`` of the original."""

    __slots__ = ("_repr", "_str")

    def __init__(self, value: object, scrub: _Scrub) -> None:
        self._str = scrub(str(value), max_length=_MAX_LINE)
        self._repr = scrub(repr(value), max_length=_MAX_LINE)

    def __str__(self) -> str:
        return self._str

    def __repr__(self) -> str:
        return self._repr


def _scrub_arg(value: object, scrub: _Scrub) -> object:
    if isinstance(value, _KEPT_TYPES):
        return value
    if isinstance(value, str):
        return scrub(value, max_length=_MAX_LINE)
    return _ScrubbedArg(value, scrub)


def _scrub_message(record: logging.LogRecord, scrub: _Scrub) -> None:
    """Scrub ``msg % args`` keeping the record's shape: ``args`` stays a tuple (or mapping)
    of the same length, each argument scrubbed, when that yields a clean message; a record
    with nothing to scrub is left untouched, and so is a message already scrubbed
    (``ScrubbedText``, no arguments)."""
    if not record.args:
        if isinstance(record.msg, ScrubbedText):
            return
        text = str(record.msg)
        clean = scrub(text, max_length=_MAX_LINE)
        if clean != text:
            record.msg = clean
        return
    text = record.getMessage()
    clean = scrub(text, max_length=_MAX_LINE)
    if clean == text:
        return
    args: Any
    if isinstance(record.args, Mapping):
        args = {key: _scrub_arg(value, scrub) for key, value in record.args.items()}
    else:
        args = tuple(_scrub_arg(value, scrub) for value in record.args)
    try:
        rebuilt = str(record.msg) % args
    except Exception:
        rebuilt = None
    if rebuilt is not None and scrub(rebuilt, max_length=_MAX_LINE) == rebuilt:
        record.args = args
    else:  # the secret spans arguments or sits in the format string itself
        record.msg, record.args = clean, ()


def _scrub_record(record: logging.LogRecord) -> None:
    own_address = record.name == _LISTEN_LOGGER and str(record.msg).startswith(_LISTEN_LINE)
    try:
        _scrub_message(record, scrub_text if own_address else scrub_log_text)
    except Exception:
        record.msg, record.args = _SCRUB_FAILED, ()
    if record.exc_info and record.exc_info[1] is not None:
        try:
            trace = "".join(traceback.format_exception(record.exc_info[1])).rstrip("\n")
            record.exc_text = scrub_log_text(trace, max_length=_MAX_LINE)
        except Exception:
            record.exc_text = _SCRUB_FAILED
        record.exc_info = None
    elif record.exc_text:
        record.exc_text = scrub_log_text(record.exc_text, max_length=_MAX_LINE)
    if record.stack_info:
        record.stack_info = scrub_log_text(record.stack_info, max_length=_MAX_LINE)


def _scrubbed_factory(previous: Any) -> Any:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record: logging.LogRecord = previous(*args, **kwargs)
        name = record.name
        if name.startswith(SCRUBBED_LOGGERS) and not name.startswith(PRE_SCRUBBED_LOGGERS):
            _scrub_record(record)
        return record

    return factory


def install_log_scrubbing() -> bool:
    """Scrub every record of ``SCRUBBED_LOGGERS`` -- every logger but the pre-scrubbed
    ones (once per process). True if installed."""
    global _installed
    if _installed or not scrub_logs_enabled():
        return _installed
    logging.setLogRecordFactory(_scrubbed_factory(logging.getLogRecordFactory()))
    _installed = True
    return True


def log_scrubbing_installed() -> bool:
    """True once ``install_log_scrubbing`` took effect."""
    return _installed


# --------------------------------------------------------------------------- formatting

LOG_FIELDS: Final = "llamon_fields"
"""Attribute (``extra={LOG_FIELDS: {...}}``) with a record's structured fields: values
already safe to show (scrubbed or of our own making), put on the JSON line as they are."""


def failure_log_fields(task_id: str, failure: FailureRecord) -> dict[str, object]:
    """The fields of a failed task's log line: task id, errorCode, reason, stage, incident id,
    retryable, operator action and the (scrubbed) message."""
    return {
        "taskId": task_id,
        "errorCode": failure.error_code.value,
        "reason": failure.reason,
        "stage": failure.stage,
        "incidentId": failure.evidence.get("incident_id"),
        "retryable": failure.retryable,
        "operatorAction": failure.operator_action,
        "message": failure.message,
    }


class TextLogFormatter(logging.Formatter):
    """``2026-01-02T03:04:05.678Z INFO llamon_agent.failures: message`` (UTC), traceback
    lines after it."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        """The record's time in UTC, ISO 8601 to the millisecond."""
        return _utc_time(record)


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (UTC), ``level``, ``logger``, ``message``, the
    record's ``LOG_FIELDS`` (a failed task's ``taskId``, ``errorCode``, ``reason``,
    ``stage``, ``incidentId`` ...) and ``exception`` (the scrubbed traceback) if any."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line: dict[str, object] = {
            "time": _utc_time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, LOG_FIELDS, None)
        if isinstance(fields, Mapping):
            line.update({str(key): value for key, value in fields.items()})
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = record.stack_info
        return json.dumps(line, ensure_ascii=False, default=str)


def _utc_time(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
