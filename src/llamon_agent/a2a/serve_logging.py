"""The logging set-up of a served agent: one format, one stream, every library.

``serve_log_config(level, "text" | "json")`` is a ``logging.config.dictConfig`` dict (the
form uvicorn's ``log_config`` takes): one stderr handler on the root logger with
``TextLogFormatter`` or ``JsonLogFormatter``, at ``level``; uvicorn's loggers lose their
own handlers and propagate to it, so its start-up and access lines share the format. A
failed task's line (logger ``llamon_agent.failures``) is written at INFO, so it shows at
the default ``info`` level and not at ``warning``.
"""

from __future__ import annotations

from typing import Any, Final, Literal

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "LogFormat", "serve_log_config"]

LogFormat = Literal["text", "json"]

LOG_FORMATS: Final = ("text", "json")
LOG_LEVELS: Final = ("critical", "error", "warning", "info", "debug")

_FORMATTERS: Final = {
    "text": "llamon_agent.core.logs.TextLogFormatter",
    "json": "llamon_agent.core.logs.JsonLogFormatter",
}


def serve_log_config(level: str, log_format: LogFormat) -> dict[str, Any]:
    """The dictConfig for ``level`` (``info``, ``warning`` ...) and ``log_format``.

    Raises ``ValueError`` naming the accepted values for an unknown level or format.
    """
    if level.lower() not in LOG_LEVELS:
        raise ValueError(f"log level {level!r}: use one of {', '.join(LOG_LEVELS)}")
    if log_format not in _FORMATTERS:
        raise ValueError(f"log format {log_format!r}: use text or json")
    upper = level.upper()
    inherit = {"handlers": [], "propagate": True}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"llamon": {"()": _FORMATTERS[log_format]}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "llamon",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["stderr"], "level": upper},
        "loggers": {
            "uvicorn": {**inherit, "level": upper},
            "uvicorn.error": {**inherit, "level": upper},
            "uvicorn.access": {**inherit, "level": upper},
        },
    }
