"""Process-wide switches that change what a failure may reveal.

Only one exists today: the debug switch for unmapped exception text. Off by default.
"""

from __future__ import annotations

import os

__all__ = ["DEBUG_ERRORS_ENV", "debug_errors_enabled", "set_debug_errors"]

DEBUG_ERRORS_ENV = "LLAMON_DEBUG_ERRORS"
"""Set to ``1``/``true``/``yes`` to let unmapped exception text (scrubbed) reach clients."""

_override: bool | None = None


def set_debug_errors(enabled: bool | None) -> None:
    """Turn the debug switch on or off for this process; ``None`` defers to the env var."""
    global _override
    _override = enabled


def debug_errors_enabled() -> bool:
    """True when unmapped exception text may be shown to clients (still scrubbed)."""
    if _override is not None:
        return _override
    return os.environ.get(DEBUG_ERRORS_ENV, "").strip().lower() in {"1", "true", "yes", "on"}
