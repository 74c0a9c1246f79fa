"""Process-wide settings read from ``LLAMON_*`` environment variables.

The debug switch for unmapped exception text (off by default); where local state lives
(``LLAMON_HOME``); which ``mcp.json`` lists the MCP servers (``LLAMON_MCP_CONFIG``);
which internal networks push webhooks may reach (``LLAMON_PUSH_ALLOW``).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "DEBUG_ERRORS_ENV",
    "HOME_ENV",
    "MCP_CONFIG_ENV",
    "PUSH_ALLOW_ENV",
    "debug_errors_enabled",
    "home_directory",
    "mcp_config_setting",
    "push_allow_setting",
    "set_debug_errors",
]

HOME_ENV = "LLAMON_HOME"
"""The local state directory (task store, checkpoints, ``mcp.json``); ``~/.llamon`` if unset."""

MCP_CONFIG_ENV = "LLAMON_MCP_CONFIG"
"""The path of the ``mcp.json`` that ``MCPToolLoader()`` reads, when set."""

DEBUG_ERRORS_ENV = "LLAMON_DEBUG_ERRORS"
"""Set to ``1``/``true``/``yes`` to let unmapped exception text (scrubbed) reach clients."""

PUSH_ALLOW_ENV = "LLAMON_PUSH_ALLOW"
"""Comma-separated networks (CIDR) push webhooks may reach although they are internal."""

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


def home_directory() -> Path:
    """``$LLAMON_HOME`` (``~`` expanded) or ``~/.llamon``; not created here."""
    value = os.environ.get(HOME_ENV, "").strip()
    return Path(value).expanduser() if value else Path.home() / ".llamon"


def mcp_config_setting() -> Path | None:
    """``$LLAMON_MCP_CONFIG`` as a path (``~`` expanded), or None when unset or empty."""
    value = os.environ.get(MCP_CONFIG_ENV, "").strip()
    return Path(value).expanduser() if value else None


def push_allow_setting() -> tuple[str, ...]:
    """``$LLAMON_PUSH_ALLOW`` split on commas (blank entries dropped); () when unset."""
    value = os.environ.get(PUSH_ALLOW_ENV, "")
    return tuple(entry.strip() for entry in value.split(",") if entry.strip())
