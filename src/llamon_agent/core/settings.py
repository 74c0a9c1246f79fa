"""Every ``LLAMON_*`` environment variable the SDK reads: its name, its default, its reader.

This module is the one place that reads them; everything else calls a reader here. Each
reader looks at the environment when called (never cached at import), so a test or an
operator can change a variable before the part that reads it starts.

* ``LLAMON_HOME`` -- local state (SQLite tasks, checkpoints, ``mcp.json``); ``~/.llamon``.
* ``LLAMON_DATABASE_URL`` -- a PostgreSQL DSN; ``open_stores()`` then picks ``postgres``.
* ``LLAMON_WORKER_ID`` -- this process's worker identity; default an opaque id of the host.
* ``LLAMON_MCP_CONFIG`` -- the ``mcp.json`` ``MCPToolLoader()`` reads; else ``./mcp.json``,
  then ``$LLAMON_HOME/mcp.json``.
* ``LLAMON_PUSH_ALLOW`` -- internal networks (CIDR, comma-separated) push webhooks may
  reach; default public addresses only.
* ``LLAMON_DEBUG_ERRORS`` -- ``1``: unmapped exception text (scrubbed) reaches clients;
  off by default.
* ``LLAMON_SCRUB_KEY`` -- the key of the scrubber's keyed hashes; random per process.
* ``LLAMON_SCRUB_LOGS`` -- ``0``: other libraries' log records are not scrubbed; on by
  default.
* ``LLAMON_IDEMPOTENCY_WINDOW`` -- seconds a server answers a repeated ``message/send``
  (same ``messageId``) with the task it started; default 86400 (24 h), ``0`` turns it off.
* ``LLAMON_FAILURES_MAX_AGE`` -- seconds a failed task's failure record is kept in the
  failure store; default 2592000 (30 days).
* ``LLAMON_FAILURES_MAX_ROWS`` -- failure records kept; default 100000 (oldest go first).
* ``LLAMON_EVENTS_MAX_AGE`` -- seconds a served task's kept runner events stay in the
  store; default 604800 (7 days).
* ``LLAMON_EVENTS_MAX_ROWS`` -- kept runner events; default 1000000 (oldest go first).
* ``LLAMON_API_KEY``, ``LLAMON_BEARER_TOKEN`` -- ``llamon serve``: the API key or bearer
  token callers must send; none by default.
* ``LLAMON_TRIAGE_GUIDE`` -- ``llamon triage``: a TOML file of triage rows that add to or
  replace the shipped guide's, by reason; none by default.
* ``LLAMON_CATALOG_URL``, ``LLAMON_CATALOG_KEY`` -- the Agent Catalog ``CatalogClient()``
  and ``AgentClient("catalog://name@range")`` use when none is passed, and its key.
* ``LLAMON_CATALOG_CACHE_MAX_AGE`` -- seconds a cached catalog resolution may be used while
  the catalog is unreachable; default 86400 (24 h), ``0``: never.
* ``LLAMON_HEARTBEAT_SECONDS`` -- with ``--redis-url``: seconds between a replica's
  heartbeats in Redis; default 5.
* ``LLAMON_WORKER_LEASE_SECONDS`` -- with ``--redis-url``: seconds without a heartbeat after
  which a replica counts as dead and the others end its unfinished tasks; default 15.
* ``LLAMON_RELAY_EXPIRE_SECONDS`` -- with ``--redis-url``: seconds a task's event stream
  stays in Redis after the run's final event; default 600.
* ``LLAMON_RELAY_MAXLEN`` -- with ``--redis-url``: about how many events a task's stream in
  Redis keeps (the oldest go first); default 10000.

``StoreKind`` names where tasks and flow checkpoints live (``open_stores()`` picks
``postgres`` when ``LLAMON_DATABASE_URL`` is set, else ``sqlite``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final, Literal, get_args

__all__ = [
    "API_KEY_ENV",
    "BEARER_TOKEN_ENV",
    "CATALOG_CACHE_MAX_AGE_ENV",
    "CATALOG_KEY_ENV",
    "CATALOG_URL_ENV",
    "CONSOLE_SECRET_ENV",
    "DATABASE_URL_ENV",
    "DEBUG_ERRORS_ENV",
    "EVENTS_MAX_AGE_ENV",
    "EVENTS_MAX_ROWS_ENV",
    "FAILURES_MAX_AGE_ENV",
    "FAILURES_MAX_ROWS_ENV",
    "HEARTBEAT_ENV",
    "HOME_ENV",
    "IDEMPOTENCY_WINDOW_ENV",
    "LAB_API_KEY_ENV",
    "LAB_BEARER_TOKEN_ENV",
    "MCP_CONFIG_ENV",
    "PUSH_ALLOW_ENV",
    "RELAY_EXPIRE_ENV",
    "RELAY_MAXLEN_ENV",
    "SCRUB_KEY_ENV",
    "SCRUB_LOGS_ENV",
    "STORE_KINDS",
    "TRIAGE_GUIDE_ENV",
    "WORKER_ID_ENV",
    "WORKER_LEASE_ENV",
    "StoreKind",
    "catalog_cache_max_age_setting",
    "catalog_key_setting",
    "catalog_url_setting",
    "console_secret_setting",
    "database_url_setting",
    "debug_errors_enabled",
    "events_max_age_setting",
    "events_max_rows_setting",
    "failures_max_age_setting",
    "failures_max_rows_setting",
    "heartbeat_setting",
    "home_directory",
    "idempotency_window_setting",
    "llamon_home",
    "mcp_config_setting",
    "push_allow_setting",
    "relay_expire_setting",
    "relay_maxlen_setting",
    "scrub_key_setting",
    "scrub_logs_enabled",
    "set_debug_errors",
    "worker_id_setting",
    "worker_lease_setting",
]

StoreKind = Literal["sqlite", "memory", "postgres"]
"""Where tasks live: a local SQLite file, this process's memory, or a PostgreSQL server."""

STORE_KINDS: Final[tuple[str, ...]] = get_args(StoreKind)
"""The store kinds, in the order ``StoreKind`` lists them."""

HOME_ENV: Final = "LLAMON_HOME"
"""The local state directory (task store, checkpoints, ``mcp.json``); ``~/.llamon`` if unset."""

DATABASE_URL_ENV: Final = "LLAMON_DATABASE_URL"
"""A PostgreSQL DSN; when set, ``open_stores()`` defaults to the ``postgres`` kind."""

WORKER_ID_ENV: Final = "LLAMON_WORKER_ID"
"""This process's worker identity; default an opaque id of this host (see ``worker_id``)."""

MCP_CONFIG_ENV: Final = "LLAMON_MCP_CONFIG"
"""The path of the ``mcp.json`` that ``MCPToolLoader()`` reads, when set."""

DEBUG_ERRORS_ENV: Final = "LLAMON_DEBUG_ERRORS"
"""Set to ``1``/``true``/``yes`` to let unmapped exception text (scrubbed) reach clients."""

PUSH_ALLOW_ENV: Final = "LLAMON_PUSH_ALLOW"
"""Comma-separated networks (CIDR) push webhooks may reach although they are internal."""

SCRUB_KEY_ENV: Final = "LLAMON_SCRUB_KEY"
"""The key of the scrubber's keyed hashes; a random per-process key when unset."""

SCRUB_LOGS_ENV: Final = "LLAMON_SCRUB_LOGS"
"""Set to ``0`` to leave other libraries' log records unscrubbed; scrubbed otherwise."""

IDEMPOTENCY_WINDOW_ENV: Final = "LLAMON_IDEMPOTENCY_WINDOW"
"""Seconds a repeated ``message/send`` is answered with the task it started; ``0``: off."""

API_KEY_ENV: Final = "LLAMON_API_KEY"
"""``llamon serve --api-key``: the API key callers must send."""

FAILURES_MAX_AGE_ENV: Final = "LLAMON_FAILURES_MAX_AGE"
"""Seconds a failure record is kept in the failure store; default 30 days."""

FAILURES_MAX_ROWS_ENV: Final = "LLAMON_FAILURES_MAX_ROWS"
"""Failure records the failure store keeps; default 100 000."""

EVENTS_MAX_AGE_ENV: Final = "LLAMON_EVENTS_MAX_AGE"
"""Seconds a served task's kept runner events stay in the store; default 7 days."""

EVENTS_MAX_ROWS_ENV: Final = "LLAMON_EVENTS_MAX_ROWS"
"""Runner events the task event store keeps; default 1 000 000."""

BEARER_TOKEN_ENV: Final = "LLAMON_BEARER_TOKEN"  # noqa: S105 (a variable name)
"""``llamon serve --bearer-token``: the bearer token callers must send."""

LAB_API_KEY_ENV: Final = "LLAMON_LAB_API_KEY"
"""``llamon lab run --api-key``: the API key sent to the agent at ``--url``."""

LAB_BEARER_TOKEN_ENV: Final = "LLAMON_LAB_BEARER_TOKEN"  # noqa: S105 (a variable name)
"""``llamon lab run --bearer-token``: the bearer token sent to the agent at ``--url``."""

CONSOLE_SECRET_ENV: Final = "LLAMON_CONSOLE_SECRET"  # noqa: S105 (a variable name)
"""The key that signs web console session cookies (the same on every replica behind one
address); a random per-process key when unset."""

CATALOG_URL_ENV: Final = "LLAMON_CATALOG_URL"
"""The Agent Catalog a ``CatalogClient`` (and ``catalog://`` in ``AgentClient``) asks by default."""

CATALOG_KEY_ENV: Final = "LLAMON_CATALOG_KEY"
"""The key sent to the Agent Catalog by default (``Authorization: Bearer``)."""

CATALOG_CACHE_MAX_AGE_ENV: Final = "LLAMON_CATALOG_CACHE_MAX_AGE"
"""Seconds a cached catalog resolution may stand in for an unreachable catalog; default 24 h."""

HEARTBEAT_ENV: Final = "LLAMON_HEARTBEAT_SECONDS"
"""Seconds between a replica's heartbeats in Redis (with a Redis URL); default 5."""

WORKER_LEASE_ENV: Final = "LLAMON_WORKER_LEASE_SECONDS"
"""Seconds a replica's heartbeat lasts in Redis: past it the replica counts as dead; default 15."""

RELAY_EXPIRE_ENV: Final = "LLAMON_RELAY_EXPIRE_SECONDS"
"""Seconds a task's event stream stays in Redis after the run's final event; default 600."""

RELAY_MAXLEN_ENV: Final = "LLAMON_RELAY_MAXLEN"
"""About how many events a task's event stream in Redis keeps; default 10 000."""

TRIAGE_GUIDE_ENV: Final = "LLAMON_TRIAGE_GUIDE"
"""A TOML file of triage rows ``llamon triage`` reads on top of the shipped guide."""

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


def llamon_home() -> Path:
    """The local state directory: ``$LLAMON_HOME`` or ``~/.llamon``, created if missing."""
    home = home_directory()
    home.mkdir(parents=True, exist_ok=True)
    return home


def database_url_setting() -> str | None:
    """``$LLAMON_DATABASE_URL`` (stripped), or None when unset or empty."""
    return os.environ.get(DATABASE_URL_ENV, "").strip() or None


def worker_id_setting() -> str | None:
    """``$LLAMON_WORKER_ID`` (stripped), or None when unset or empty."""
    return os.environ.get(WORKER_ID_ENV, "").strip() or None


def mcp_config_setting() -> Path | None:
    """``$LLAMON_MCP_CONFIG`` as a path (``~`` expanded), or None when unset or empty."""
    value = os.environ.get(MCP_CONFIG_ENV, "").strip()
    return Path(value).expanduser() if value else None


def push_allow_setting() -> tuple[str, ...]:
    """``$LLAMON_PUSH_ALLOW`` split on commas (blank entries dropped); () when unset."""
    value = os.environ.get(PUSH_ALLOW_ENV, "")
    return tuple(entry.strip() for entry in value.split(",") if entry.strip())


def scrub_key_setting() -> bytes | None:
    """``$LLAMON_SCRUB_KEY`` as UTF-8 bytes, or None when unset or empty."""
    value = os.environ.get(SCRUB_KEY_ENV, "")
    return value.encode("utf-8") if value else None


def scrub_logs_enabled() -> bool:
    """False only when ``$LLAMON_SCRUB_LOGS`` is ``0``: log scrubbing is on by default."""
    return os.environ.get(SCRUB_LOGS_ENV, "1").strip() != "0"


def _seconds_setting(name: str) -> float | None:
    """``$name`` as a finite number of seconds >= 0, or None when unset or empty;
    ``ValueError`` naming the variable otherwise."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")
    return seconds


def idempotency_window_setting() -> float | None:
    """``$LLAMON_IDEMPOTENCY_WINDOW`` in seconds, or None when unset or empty.

    Raises ``ValueError`` naming the variable when it is not a finite number >= 0.
    """
    return _seconds_setting(IDEMPOTENCY_WINDOW_ENV)


def failures_max_age_setting() -> float | None:
    """``$LLAMON_FAILURES_MAX_AGE`` in seconds, or None when unset or empty.

    Raises ``ValueError`` naming the variable when it is not a finite number > 0.
    """
    return _positive_seconds(FAILURES_MAX_AGE_ENV)


def failures_max_rows_setting() -> int | None:
    """``$LLAMON_FAILURES_MAX_ROWS``, or None when unset or empty.

    Raises ``ValueError`` naming the variable when it is not a whole number >= 1.
    """
    return _positive_count(FAILURES_MAX_ROWS_ENV)


def events_max_age_setting() -> float | None:
    """``$LLAMON_EVENTS_MAX_AGE`` in seconds, or None when unset or empty.

    Raises ``ValueError`` naming the variable when it is not a finite number > 0.
    """
    return _positive_seconds(EVENTS_MAX_AGE_ENV)


def events_max_rows_setting() -> int | None:
    """``$LLAMON_EVENTS_MAX_ROWS``, or None when unset or empty.

    Raises ``ValueError`` naming the variable when it is not a whole number >= 1.
    """
    return _positive_count(EVENTS_MAX_ROWS_ENV)


def _positive_seconds(name: str) -> float | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise ValueError(f"{name} must be a number of seconds > 0, got {value!r}")
    return seconds


def _positive_count(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        rows = int(value)
    except ValueError:
        rows = 0
    if rows < 1:
        raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    return rows


def console_secret_setting() -> bytes | None:
    """``LLAMON_CONSOLE_SECRET`` as bytes, or ``None`` when unset or blank."""
    value = os.environ.get(CONSOLE_SECRET_ENV, "").strip()
    return value.encode() if value else None


def catalog_url_setting() -> str | None:
    """``$LLAMON_CATALOG_URL`` (stripped), or None when unset or empty."""
    return os.environ.get(CATALOG_URL_ENV, "").strip() or None


def catalog_key_setting(name: str = CATALOG_KEY_ENV) -> str | None:
    """The catalog key in ``$LLAMON_CATALOG_KEY`` (or the variable ``name``), stripped;
    None when unset or empty."""
    return os.environ.get(name, "").strip() or None


def catalog_cache_max_age_setting() -> float | None:
    """``$LLAMON_CATALOG_CACHE_MAX_AGE`` in seconds (``0``: a cached resolution is never
    used), or None when unset or empty.

    Raises ``ValueError`` naming the variable when it is not a finite number >= 0.
    """
    return _seconds_setting(CATALOG_CACHE_MAX_AGE_ENV)


def heartbeat_setting() -> float | None:
    """``$LLAMON_HEARTBEAT_SECONDS``, or None when unset or empty.

    Raises ``ValueError`` naming the variable when it is not a finite number > 0.
    """
    return _positive_seconds(HEARTBEAT_ENV)


def worker_lease_setting() -> float | None:
    """``$LLAMON_WORKER_LEASE_SECONDS``, or None when unset or empty.

    Raises ``ValueError`` naming the variable when it is not a finite number > 0.
    """
    return _positive_seconds(WORKER_LEASE_ENV)


def relay_expire_setting() -> float | None:
    """``$LLAMON_RELAY_EXPIRE_SECONDS``, or None when unset or empty.

    Raises ``ValueError`` naming the variable when it is not a finite number > 0.
    """
    return _positive_seconds(RELAY_EXPIRE_ENV)


def relay_maxlen_setting() -> int | None:
    """``$LLAMON_RELAY_MAXLEN``, or None when unset or empty.

    Raises ``ValueError`` naming the variable when it is not a whole number >= 1.
    """
    return _positive_count(RELAY_MAXLEN_ENV)
