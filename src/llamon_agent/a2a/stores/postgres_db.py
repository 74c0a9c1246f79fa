"""One PostgreSQL database for llamon's stores: a writer with batched commits, and a pool.

What the caller sees:

* ``await PostgresDatabase.open(dsn, prepare=...)`` connects (asyncpg), runs
  ``prepare(connection)`` once (schema work), then opens a pool of ``POOL_MIN_SIZE`` to
  ``POOL_MAX_SIZE`` connections for reads and a connection of the writer's own.
  ``await db.close()`` commits the writes already queued, then closes everything (safe to
  call twice; afterwards every call raises ``RuntimeError``).
* ``await db.write(sql, args)`` returns once its statement is committed. The writer takes
  every write waiting in its queue and commits them in one transaction (group commit: one
  ``executemany`` of a prepared statement per run of equal statements; a batch of one
  statement is one atomic ``executemany``, a single round trip), so throughput
  grows with concurrency. If a batch fails, each write is retried in a transaction of its
  own, so one bad row fails only its own caller -- except when the database does not
  answer (the table in ``core.classify`` calls the failure retriable): then every caller
  in the batch gets the error at once, and the next batch reconnects.
* ``await db.fetch_one(sql, *args)`` / ``fetch_all`` / ``fetch_value`` read on a pooled
  connection and see every committed write. Pooled connections are not reset on release
  (the stores keep no session state), which saves a round trip per read.
* Errors are asyncpg's own (``asyncpg.PostgresError``, ``InterfaceError``),
  ``TimeoutError``, or ``ConnectionError`` when the server cannot be reached (any other
  ``OSError`` while connecting -- a name that does not resolve, every address refused --
  becomes ``ConnectionError("the database cannot be reached")``, its cause chained).
  asyncpg's text can name the server, so callers classify it and never show it
  (``a2a.stores.guard``: ``database_unavailable``).
* ``db.commits`` and ``db.writes`` count commits and the writes they carried.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Final

import asyncpg

from llamon_agent.core.classify import classify_exception

__all__ = [
    "CONNECT_TIMEOUT",
    "POOL_MAX_SIZE",
    "POOL_MIN_SIZE",
    "PostgresDatabase",
    "as_lost",
    "asyncpg_dsn",
]

logger = logging.getLogger(__name__)

POOL_MIN_SIZE: Final = 1
"""Pooled read connections kept open while idle."""
POOL_MAX_SIZE: Final = 8
"""Pooled read connections at most (the writer has one more of its own)."""
CONNECT_TIMEOUT: Final = 10.0
"""Seconds a new connection may take before it fails (``TimeoutError``)."""

_MAX_BATCH: Final = 256

Prepare = Callable[["asyncpg.Connection"], Awaitable[object]]
"""Schema work run once, on the first connection, before the pool opens."""


def asyncpg_dsn(dsn: str) -> str:
    """``dsn`` as asyncpg reads it: the ``postgresql+asyncpg://`` scheme becomes
    ``postgresql://`` (``sslmode`` and every other libpq parameter are asyncpg's too)."""
    scheme, separator, rest = dsn.partition("://")
    if separator and scheme.lower() in {"postgresql+asyncpg", "postgres"}:
        return f"postgresql://{rest}"
    return dsn


@dataclass(slots=True)
class _Write:
    sql: str
    args: Sequence[Any]
    future: asyncio.Future[None]


def _settle(batch: Sequence[_Write], error: BaseException | None) -> None:
    for write in batch:
        if write.future.done():  # its caller was cancelled; the write still happened
            continue
        if error is None:
            write.future.set_result(None)
        else:
            write.future.set_exception(error)


def _runs(batch: Sequence[_Write]) -> list[tuple[str, list[Sequence[Any]]]]:
    """Consecutive writes of one statement grouped, in order (a delete after a save of the
    same row stays after it)."""
    runs: list[tuple[str, list[Sequence[Any]]]] = []
    for write in batch:
        if runs and runs[-1][0] == write.sql:
            runs[-1][1].append(write.args)
        else:
            runs.append((write.sql, [write.args]))
    return runs


def _unreachable(exc: BaseException) -> bool:
    """The database does not answer (by the one table): no use retrying row by row."""
    return classify_exception(exc).retriable


@contextmanager
def _reaching() -> Iterator[None]:
    """``OSError`` other than ``ConnectionError`` / ``TimeoutError`` (a host that does not
    resolve, asyncpg's "Multiple exceptions" when every address refused) as
    ``ConnectionError``, so the one table calls it what it is: the database is not reached."""
    try:
        yield
    except (ConnectionError, TimeoutError):
        raise
    except OSError as exc:
        raise ConnectionError("the database cannot be reached") from exc


def as_lost(exc: Exception, connection: asyncpg.Connection) -> Exception:
    """``exc`` raised by a call on ``connection``: when the server dropped the connection
    (it is closed now) and ``exc`` does not say so by the one table -- asyncpg may report a
    backend that ended mid-call as an ``InternalClientError`` about its protocol state --
    a ``ConnectionResetError`` chained to it, so the caller sees the database gone; else
    ``exc`` itself."""
    if connection.is_closed() and not _unreachable(exc):
        lost = ConnectionResetError("the database closed the connection")
        lost.__cause__ = exc
        return lost
    return exc


@asynccontextmanager
async def _pooled(pool: asyncpg.Pool) -> AsyncIterator[asyncpg.Connection]:
    """A connection of ``pool`` for one call (``_reaching``), an error on a connection the
    server dropped reported as such (``as_lost``)."""
    with _reaching():
        async with pool.acquire() as connection:
            try:
                yield connection
            except Exception as exc:
                lost = as_lost(exc, connection)
                if lost is exc:
                    raise
                raise lost from exc


async def _no_reset(connection: asyncpg.Connection) -> None:
    """Pool release without asyncpg's reset query: the stores set no session state."""


class _Writer:
    """A task that owns one connection and commits queued writes in batches."""

    def __init__(self, connect: Callable[[], Awaitable[asyncpg.Connection]]) -> None:
        self._connect = connect
        self._connection: asyncpg.Connection | None = None
        self._queue: asyncio.Queue[_Write | None] = asyncio.Queue()  # None: stop
        self._task: asyncio.Task[None] | None = None
        self.batches = 0
        self.writes = 0

    def start(self, connection: asyncpg.Connection) -> None:
        self._connection = connection
        self._task = asyncio.create_task(self._main(), name="llamon-postgres-writer")

    def submit(self, sql: str, args: Sequence[Any]) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Write(sql, args, future))
        return future

    async def stop(self) -> None:
        """Commit the queued writes, then close the connection."""
        self._queue.put_nowait(None)
        if self._task is not None:
            await self._task
        if self._connection is not None and not self._connection.is_closed():
            try:
                await self._connection.close(timeout=CONNECT_TIMEOUT)
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
                self._connection.terminate()
        self._connection = None

    async def _main(self) -> None:
        while True:
            batch, stop = await self._take_batch()
            if batch:
                try:
                    await self._commit(batch)
                except BaseException as exc:  # never leave a caller waiting
                    _settle(batch, exc if isinstance(exc, Exception) else RuntimeError())
                    if not isinstance(exc, Exception):
                        raise
            if stop:
                return

    async def _take_batch(self) -> tuple[list[_Write], bool]:
        first = await self._queue.get()
        if first is None:
            return [], True
        batch = [first]
        while len(batch) < _MAX_BATCH:
            try:
                item = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    async def _commit(self, batch: list[_Write]) -> None:
        """One transaction for ``batch``; on failure, each write alone unless the database
        does not answer, when every write gets the error."""
        error = await self._transaction(batch)
        if error is None:
            _settle(batch, None)
        elif len(batch) == 1 or _unreachable(error):
            _settle(batch, error)
        else:
            for write in batch:
                _settle([write], await self._transaction([write]))

    async def _transaction(self, batch: list[_Write]) -> Exception | None:
        runs = _runs(batch)
        try:
            connection = await self._open_connection()
            if len(runs) == 1:  # executemany is atomic on its own: one round trip
                await connection.executemany(*runs[0])
            else:
                async with connection.transaction():
                    for sql, rows in runs:
                        await connection.executemany(sql, rows)
        except Exception as exc:
            connection = self._connection
            if connection is None:
                return exc
            exc = as_lost(exc, connection)
            if connection.is_closed() or _unreachable(exc):
                connection.terminate()
                self._connection = None  # the next batch connects again
            return exc
        self.batches += 1
        self.writes += len(batch)
        return None

    async def _open_connection(self) -> asyncpg.Connection:
        if self._connection is None or self._connection.is_closed():
            self._connection = await self._connect()
        return self._connection


class PostgresDatabase:
    """One PostgreSQL database opened for the stores (see the module docstring)."""

    def __init__(self, pool: asyncpg.Pool, writer: _Writer) -> None:
        self.pool = pool
        self._writer = writer
        self._closed = False

    @classmethod
    async def open(cls, dsn: str, *, prepare: Prepare) -> PostgresDatabase:
        """Connect to ``dsn``, run ``prepare`` on the first connection, open the pool and
        start the writer. Raises what ``prepare`` raises, and asyncpg's or ``OSError`` when
        the server cannot be reached."""
        url = asyncpg_dsn(dsn)

        async def connect() -> asyncpg.Connection:
            with _reaching():
                connection: asyncpg.Connection = await asyncpg.connect(url, timeout=CONNECT_TIMEOUT)
            return connection

        connection: asyncpg.Connection = await connect()
        try:
            await prepare(connection)
            pool: asyncpg.Pool = await asyncpg.create_pool(
                url,
                min_size=POOL_MIN_SIZE,
                max_size=POOL_MAX_SIZE,
                timeout=CONNECT_TIMEOUT,
                reset=_no_reset,
            )
        except BaseException:
            connection.terminate()
            raise
        writer = _Writer(connect)
        writer.start(connection)
        return cls(pool, writer)

    @property
    def commits(self) -> int:
        """Transactions the writer committed so far."""
        return self._writer.batches

    @property
    def writes(self) -> int:
        """Writes committed so far (``writes / commits`` is the mean batch size)."""
        return self._writer.writes

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the PostgreSQL store is closed")

    async def write(self, sql: str, args: Sequence[Any]) -> None:
        """Run ``sql`` with ``args`` in the next commit; returns once it is committed."""
        self._check_open()
        await self._writer.submit(sql, args)

    async def fetch_one(self, sql: str, *args: Any) -> asyncpg.Record | None:
        """The first row of ``sql``, or ``None``."""
        self._check_open()
        async with _pooled(self.pool) as connection:
            row: asyncpg.Record | None = await connection.fetchrow(sql, *args)
        return row

    async def fetch_all(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        """Every row of ``sql``."""
        self._check_open()
        async with _pooled(self.pool) as connection:
            rows: list[asyncpg.Record] = await connection.fetch(sql, *args)
        return rows

    async def fetch_value(self, sql: str, *args: Any) -> Any:
        """The first column of the first row of ``sql`` (run in its own transaction: an
        ``UPDATE ... RETURNING`` is committed when this returns)."""
        self._check_open()
        async with _pooled(self.pool) as connection:
            return await connection.fetchval(sql, *args)

    async def close(self) -> None:
        """Commit the queued writes, then close the writer's connection and the pool."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._writer.stop()
        finally:
            try:
                await asyncio.wait_for(self.pool.close(), CONNECT_TIMEOUT)
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
                self.pool.terminate()
