"""The one way a pydantic ``ValidationError`` is put into words.

Every place that explains why a value did not validate (a tool's arguments, an agent
card, error data, a domain catalog) names each failing field by its path and pydantic's
description of the problem, never the value that was sent::

    items[0].name: Field required; retries: Input should be a valid integer

``error_path`` spells one location; ``validation_problems`` gives ``(path, message)``
per error; ``format_validation_error`` joins them into one line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

__all__ = ["error_message", "error_path", "format_validation_error", "validation_problems"]


def error_path(loc: Sequence[int | str]) -> str:
    """``("items", 0, "name")`` -> ``"items[0].name"``; ``""`` for the whole value."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def error_message(error: Mapping[str, Any]) -> str:
    """Pydantic's message of one error (of ``ValidationError.errors()``); never its input."""
    return str(error["msg"])


def validation_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """``(path, message)`` per error, in pydantic's order; no input values."""
    return [(error_path(error["loc"]), error_message(error)) for error in exc.errors()]


def format_validation_error(exc: ValidationError, *, whole: str = "$") -> str:
    """``"path: message; path: message"``, each distinct problem once; a problem of the
    whole value is named ``whole``."""
    problems = validation_problems(exc)
    return "; ".join(dict.fromkeys(f"{path or whole}: {message}" for path, message in problems))
