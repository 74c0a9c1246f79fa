"""Log lines pass the security boundary too.

Our own log lines are scrubbed where they are written. Libraries underneath are not: a2a-sdk
logs request bodies at DEBUG and pydantic validation errors (with the offending input) on
a bad request, uvicorn and httpx log URLs. ``install_log_scrubbing()`` wraps the log-record
factory so that every record from those libraries and from llamon itself is scrubbed when
it is created -- message, arguments and traceback -- whatever handlers are configured.
The server installs it; ``LLAMON_SCRUB_LOGS=0`` turns it off.
"""

from __future__ import annotations

import logging
import os
import traceback
from typing import Any, Final

from llamon_agent.core.scrub import scrub_text

__all__ = [
    "PRE_SCRUBBED_LOGGERS",
    "SCRUBBED_LOGGERS",
    "install_log_scrubbing",
    "log_scrubbing_installed",
]

SCRUBBED_LOGGERS: Final = (
    "a2a",
    "llamon_agent",
    "uvicorn",
    "httpx",
    "httpcore",
    "mcp",
    "starlette",
)
"""Logger name prefixes whose records are scrubbed."""

PRE_SCRUBBED_LOGGERS: Final = ("llamon_agent.failures",)
"""Loggers whose lines are built only from scrubbed values (``FailureRecord.to_dict()``)."""

_MAX_LINE: Final = 20_000
_installed = False


def _scrubbed_factory(previous: Any) -> Any:
    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record: logging.LogRecord = previous(*args, **kwargs)
        name = record.name
        if not name.startswith(SCRUBBED_LOGGERS) or name.startswith(PRE_SCRUBBED_LOGGERS):
            return record
        try:
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                text += "\n" + "".join(traceback.format_exception(record.exc_info[1]))
            record.msg = scrub_text(text, max_length=_MAX_LINE)
        except Exception:
            record.msg = "[REDACTED:log_scrub_failed]"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        return record

    return factory


def install_log_scrubbing() -> bool:
    """Scrub every record of ``SCRUBBED_LOGGERS`` (once per process). True if installed."""
    global _installed
    if _installed or os.environ.get("LLAMON_SCRUB_LOGS", "1").strip() == "0":
        return _installed
    logging.setLogRecordFactory(_scrubbed_factory(logging.getLogRecordFactory()))
    _installed = True
    return True


def log_scrubbing_installed() -> bool:
    """True once ``install_log_scrubbing`` took effect."""
    return _installed
