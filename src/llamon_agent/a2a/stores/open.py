"""Where an agent's A2A tasks and push-notification configs live: SQLite, memory or PostgreSQL.

What the caller sees:

* ``stores = await open_stores()`` gives a ``Stores`` holding a2a-sdk's own ``TaskStore``
  and ``PushNotificationConfigStore``, ready for ``DefaultRequestHandler``; tables exist
  when it returns. ``await stores.close()`` releases the database connections.
* Without arguments the kind is ``postgres`` when ``LLAMON_DATABASE_URL`` is set, else
  ``sqlite``: the file ``tasks.db`` under ``llamon_home()`` (``LLAMON_HOME`` or
  ``~/.llamon``), served by llamon's own store (``sqlite_store``: WAL, batched commits on
  the event loop while the file is free, else on a writer thread, and a reader thread).
  ``memory`` keeps tasks in this process, evicting finished ones past ``memory_limits``
  (``memory_store``), and loses them on exit.
* ``postgres``: llamon's own store on asyncpg (``postgres``, ``postgres_db``: one row per task, a
  writer with batched commits, a pool of up to 8 read connections). PostgreSQL DSNs are
  written the usual way (``postgresql://`` or ``postgres://``) and become
  ``postgresql+asyncpg://`` URLs; ``sslmode=`` becomes asyncpg's ``ssl=``.
* Bad input raises ``ValueError`` naming what was wrong. A DSN's password never appears in
  an error message or in ``Stores.description``: it is shown as ``***``.
* ``await reconcile_orphaned_tasks(stores)`` at startup, before serving, ends as ``failed``
  every ``submitted``/``working`` task that this worker (``worker_id()``) left behind when
  it stopped, so ``tasks/get`` answers a retriable ``UPSTREAM_UNAVAILABLE`` /
  ``worker_lost`` error instead of ``working`` forever. Tasks stamped by other workers are
  never touched: replicas sharing one PostgreSQL each reconcile only their own tasks.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from a2a.server.tasks import PushNotificationConfigStore, TaskStore

from llamon_agent._extras import missing_extra
from llamon_agent.a2a.stores.failures import (
    FailureRetention,
    FailureStore,
    MemoryFailureStore,
)
from llamon_agent.a2a.stores.failures_sql import (
    PostgresFailureStore,
    SQLiteFailureStore,
    create_postgres_failure_table,
)
from llamon_agent.a2a.stores.memory import (
    BoundedMemoryPushConfigStore,
    BoundedMemoryTaskStore,
    MemoryLimits,
)
from llamon_agent.a2a.stores.reconcile import reconcile_orphaned_tasks
from llamon_agent.a2a.stores.retention import EventRetention
from llamon_agent.a2a.stores.sqlite import (
    SQLitePushConfigStore,
    SQLiteTaskStore,
    open_sqlite_database,
)
from llamon_agent.a2a.stores.sqlite_db import SQLITE_BUSY_TIMEOUT_MS, SQLiteDatabase
from llamon_agent.a2a.stores.task_events import MemoryTaskEventStore, TaskEventStore
from llamon_agent.a2a.stores.task_events_sql import (
    PostgresTaskEventStore,
    SQLiteTaskEventStore,
    create_postgres_task_event_table,
)
from llamon_agent.a2a.stores.workers import WORKER_METADATA_KEY, worker_id
from llamon_agent.core.settings import (
    DATABASE_URL_ENV,
    HOME_ENV,
    STORE_KINDS,
    WORKER_ID_ENV,
    StoreKind,
    database_url_setting,
    llamon_home,
)

_NO_POSTGRES: ImportError | None = None
"""Why the postgres store cannot open here (the core install has no ``[postgres]`` extra)."""
try:  # SQLite and memory need none of it
    from sqlalchemy.engine import URL, make_url
    from sqlalchemy.exc import ArgumentError, IntegrityError, ProgrammingError
    from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

    from llamon_agent.a2a.stores.postgres import (
        PostgresPushConfigStore,
        PostgresTaskStore,
        open_postgres_database,
    )
    from llamon_agent.a2a.stores.postgres_db import PostgresDatabase, asyncpg_dsn
except ImportError as exc:
    _NO_POSTGRES = exc

__all__ = [
    "DATABASE_URL_ENV",
    "HOME_ENV",
    "SQLITE_BUSY_TIMEOUT_MS",
    "SQLITE_FILENAME",
    "WORKER_ID_ENV",
    "WORKER_METADATA_KEY",
    "EventRetention",
    "FailureRetention",
    "MemoryLimits",
    "StoreKind",
    "Stores",
    "llamon_home",
    "memory_stores",
    "normalize_postgres_dsn",
    "open_stores",
    "reconcile_orphaned_tasks",
    "worker_id",
]

logger = logging.getLogger(__name__)

SQLITE_FILENAME: Final = "tasks.db"
"""Name of the SQLite task file under the home directory."""

_KINDS: Final = STORE_KINDS
_POSTGRES_SCHEMES: Final = frozenset({"postgresql", "postgres", "postgresql+asyncpg"})
_LOGGED_IDS: Final = 20
_USERINFO_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://[^:/@?#]*:)(.*)@")
_PARAM_PASSWORD = re.compile(r"(password\s*=\s*)[^&\s#]*", re.IGNORECASE)


@dataclass
class Stores:
    """The task store and push-config store an A2A server uses, and how to release them.

    ``postgres`` is the ``PostgresDatabase`` (asyncpg: a writer with batched commits and a
    read pool) both PostgreSQL stores share, ``engine`` the SQLAlchemy engine its failure
    and event stores use, and ``database`` the ``SQLiteDatabase`` both SQLite stores share
    (each ``None`` otherwise);
    ``description`` says where the data lives, e.g. ``sqlite:/home/me/.llamon/tasks.db``,
    with any DSN password masked. ``failures`` is the failure store in the same database
    (``stores.failures``: every failed task's failure record, queryable); ``events`` keeps
    every served task's runner events (``stores.events.for_task(task_id)``).
    """

    task_store: TaskStore
    push_config_store: PushNotificationConfigStore
    kind: StoreKind
    engine: AsyncEngine | None = None
    description: str = ""
    database: SQLiteDatabase | None = None
    failures: FailureStore | None = None
    events: TaskEventStore | None = None
    postgres: PostgresDatabase | None = None

    def __post_init__(self) -> None:
        if not self.description:
            self.description = self.kind

    async def close(self) -> None:
        """Close the database connections (safe to call twice; a no-op for memory).

        SQLite and PostgreSQL: the writes already queued are committed first, failure
        records included."""
        if self.failures is not None:
            await self.failures.close()
        if self.events is not None:
            await self.events.close()
        if self.engine is not None:
            await self.engine.dispose()
        if self.postgres is not None:
            await self.postgres.close()
        if self.database is not None:
            await self.database.close()


def _mask_dsn(dsn: str) -> str:
    """``dsn`` with the userinfo password and any ``password=`` parameter shown as ``***``."""
    masked = _USERINFO_PASSWORD.sub(r"\1***@", dsn, count=1)
    return _PARAM_PASSWORD.sub(r"\1***", masked)


def normalize_postgres_dsn(dsn: str) -> str:
    """The asyncpg URL for a ``postgresql://`` or ``postgres://`` DSN.

    ``sslmode=`` (libpq's name) becomes ``ssl=`` (asyncpg's). Raises ``ValueError`` for
    anything that is not a PostgreSQL URL, with the password masked in the message, and
    ``ImportError`` naming ``llamon-agent[postgres]`` when that extra is not installed.
    """
    if _NO_POSTGRES is not None:
        raise missing_extra("postgres", "the postgres task store", _NO_POSTGRES)
    scheme, separator, rest = dsn.strip().partition("://")
    if not separator:
        raise ValueError(
            "the PostgreSQL DSN must be a URL like postgresql://user:password@host:5432/db,"
            f" got {_mask_dsn(dsn)!r}"
        )
    if scheme.lower() not in _POSTGRES_SCHEMES:
        raise ValueError(
            f"unsupported DSN scheme {scheme!r} in {_mask_dsn(dsn)!r}:"
            " expected postgresql:// or postgres://"
        )
    try:
        url = make_url(f"postgresql+asyncpg://{rest}")
    except (ArgumentError, ValueError):
        raise ValueError(f"could not parse the PostgreSQL DSN {_mask_dsn(dsn)!r}") from None
    return _libpq_params_to_asyncpg(url).render_as_string(hide_password=False)


def _libpq_params_to_asyncpg(url: URL) -> URL:
    sslmode = url.query.get("sslmode")
    if sslmode is None:
        return url
    return url.difference_update_query(["sslmode"]).update_query_dict({"ssl": sslmode})


def _resolve_kind(kind: str | None, dsn: str | None) -> tuple[StoreKind, str | None]:
    """The kind to open and, for postgres, the raw DSN to use."""
    dsn = dsn or None
    env_dsn = database_url_setting()
    if kind is None:
        kind = "postgres" if dsn or env_dsn else "sqlite"
    if kind == "postgres":
        if not (dsn or env_dsn):
            raise ValueError(f"the postgres store needs a DSN: pass dsn= or set {DATABASE_URL_ENV}")
        return "postgres", dsn or env_dsn
    if dsn is not None and kind in _KINDS:
        raise ValueError(
            f"dsn= is only used by the postgres store, not by {kind!r} (got {_mask_dsn(dsn)!r})"
        )
    if kind == "sqlite":
        return "sqlite", None
    if kind == "memory":
        return "memory", None
    raise ValueError(f"unknown store kind {kind!r}: expected one of {', '.join(sorted(_KINDS))}")


def _postgres_engine(url: str) -> AsyncEngine:
    # pre-ping: a pooled connection cut by a server restart or failover is replaced
    # instead of failing the next request.
    return create_async_engine(url, pool_pre_ping=True)


async def _create_tables(engine: AsyncEngine) -> None:
    """Create the failure and task event tables if missing, in one transaction.

    Two replicas starting at once on an empty PostgreSQL can both decide a table is
    missing; the loser's ``CREATE`` fails with a duplicate error, and one retry (which now
    sees the table) settles it.
    """
    for attempt in (1, 2):
        try:
            async with engine.begin() as connection:
                await create_postgres_failure_table(connection)
                await create_postgres_task_event_table(connection)
            return
        except (IntegrityError, ProgrammingError):
            if attempt == 2:
                raise
            logger.info("table creation raced with another process; retrying once")


async def _open_postgres_stores(
    url: str,
    description: str,
    push_encryption_key: bytes | None,
    retention: FailureRetention,
    events_retention: EventRetention,
) -> Stores:
    """llamon's PostgreSQL stores at ``url``, tables created; everything closed on failure."""
    database = await open_postgres_database(asyncpg_dsn(url))
    engine = _postgres_engine(url)
    try:
        push_store = PostgresPushConfigStore(database, encryption_key=push_encryption_key)
        await _create_tables(engine)
        failures = PostgresFailureStore(engine, retention)
        await failures.prune()
        events = PostgresTaskEventStore(engine, events_retention)
        await events.prune()
    except BaseException:
        await engine.dispose()
        await database.close()
        raise
    return Stores(
        PostgresTaskStore(database),
        push_store,
        "postgres",
        engine,
        description,
        failures=failures,
        events=events,
        postgres=database,
    )


async def _open_sqlite_stores(
    home: Path | None,
    push_encryption_key: bytes | None,
    retention: FailureRetention,
    events_retention: EventRetention,
) -> Stores:
    directory = home if home is not None else llamon_home()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory.resolve() / SQLITE_FILENAME
    database = await open_sqlite_database(path)
    try:
        push_store = SQLitePushConfigStore(database, encryption_key=push_encryption_key)
        failures = SQLiteFailureStore(database, retention)
        await failures.prune()
        events = SQLiteTaskEventStore(database, events_retention)
        await events.prune()
    except BaseException:
        await database.close()
        raise
    return Stores(
        SQLiteTaskStore(database),
        push_store,
        "sqlite",
        description=f"sqlite:{path}",
        database=database,
        failures=failures,
        events=events,
    )


def memory_stores(
    limits: MemoryLimits | None = None, failure_retention: FailureRetention | None = None
) -> Stores:
    """The ``memory`` kind, without awaiting: bounded task store, linked push store, and a
    bounded failure store (``failure_retention``, default ``FailureRetention.from_settings()``).

    The push configs of an evicted task are dropped with it. ``events`` keeps the last
    runner events of the last tasks (``MemoryTaskEventStore``).
    """
    push_store = BoundedMemoryPushConfigStore()
    task_store = BoundedMemoryTaskStore(limits, on_evict=push_store.forget)
    failures = MemoryFailureStore(failure_retention or FailureRetention.from_settings())
    events = MemoryTaskEventStore()
    return Stores(task_store, push_store, "memory", failures=failures, events=events)


async def open_stores(
    kind: StoreKind | None = None,
    *,
    dsn: str | None = None,
    home: Path | None = None,
    push_encryption_key: bytes | None = None,
    memory_limits: MemoryLimits | None = None,
    failure_retention: FailureRetention | None = None,
    events_retention: EventRetention | None = None,
) -> Stores:
    """Open the task, push-config, failure and task event stores of ``kind``, creating
    tables if needed.

    ``kind`` defaults to ``postgres`` when ``dsn`` or ``LLAMON_DATABASE_URL`` is set, else
    ``sqlite``. ``home`` is the SQLite directory (default ``llamon_home()``).
    ``push_encryption_key`` (a Fernet key) encrypts push configs at rest in a database;
    memory stores ignore it. ``memory_limits`` bounds the memory store (default
    ``MemoryLimits()``: 10 000 finished tasks, kept at most an hour). Raises
    ``ValueError`` for an unknown kind, a postgres store without a DSN, a DSN that is not
    a PostgreSQL URL, ``memory_limits`` for another kind, a SQLite file written by a newer
    llamon, or a push key that is not a Fernet key; connection errors propagate.
    ``failure_retention`` bounds ``stores.failures`` (default
    ``FailureRetention.from_settings()``: 30 days, 100 000 rows, or ``LLAMON_FAILURES_*``);
    rows past it are pruned on open and every ``PRUNE_EVERY`` writes. ``events_retention``
    bounds ``stores.events`` the same way (default ``EventRetention.from_settings()``: 7
    days, 1 000 000 events, or ``LLAMON_EVENTS_*``; the memory store keeps the last 1 000
    events of the last 1 000 tasks instead).
    """
    resolved, raw_dsn = _resolve_kind(kind, dsn)
    if memory_limits is not None and resolved != "memory":
        raise ValueError(f"memory_limits= is only used by the memory store, not by {resolved!r}")
    retention = failure_retention or FailureRetention.from_settings()
    kept_events = events_retention or EventRetention.from_settings()
    if resolved == "memory":
        return memory_stores(memory_limits, retention)
    if resolved == "sqlite":
        return await _open_sqlite_stores(home, push_encryption_key, retention, kept_events)
    url = normalize_postgres_dsn(raw_dsn or "")
    description = f"postgres:{_mask_dsn(url)}"
    return await _open_postgres_stores(
        url, description, push_encryption_key, retention, kept_events
    )
