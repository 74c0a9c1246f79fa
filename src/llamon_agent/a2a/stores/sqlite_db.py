"""One SQLite file served by two threads: a writer with batched commits, and a reader.

What the caller sees:

* ``await SQLiteDatabase.open(path, prepare=...)`` opens (creating if needed) the file,
  runs ``prepare(connection, path)`` once on the write connection (schema work), and
  starts the threads; ``await db.close()`` commits the writes already queued, then closes
  both connections (safe to call twice; afterwards every call raises ``RuntimeError``
  naming the file). Open errors are ``sqlite3.Error`` naming the file.
* ``await db.write(*statements)`` returns once its statements are committed. The writer
  thread takes every write waiting in its queue and commits them in one transaction
  (group commit), so throughput grows with concurrency instead of queueing on a lock. A
  write that raises is retried alone, so it never takes the others with it; a lock or disk
  error at BEGIN/COMMIT fails its batch at once. Whatever goes wrong, every caller gets an
  answer.
* ``await db.read(query)`` runs ``query(connection)`` on the reader thread's read-only
  connection. In WAL mode a read never waits for a writer (this process's or another's);
  neither thread blocks the event loop.
* Connections: autocommit with explicit transactions, WAL, ``synchronous=NORMAL`` (a
  process killed at any moment loses nothing ``write`` returned for; a power loss can lose
  the last commits, never corrupt the file), ``busy_timeout`` ``SQLITE_BUSY_TIMEOUT_MS``,
  and sqlite3's statement cache, so fixed SQL strings are prepared once per connection.
* ``db.commits`` and ``db.writes`` count commits and the writes they carried.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

__all__ = [
    "SQLITE_BUSY_TIMEOUT_MS",
    "SQLiteDatabase",
    "Statement",
    "fetch_all",
    "fetch_one",
    "rollback",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

Statement = tuple[str, Sequence[Any] | Mapping[str, Any]]
"""One SQL statement and its parameters (positional, or named)."""

SQLITE_BUSY_TIMEOUT_MS: Final = 5_000
"""How long a connection waits for another process's write lock before failing."""

_MAX_BATCH: Final = 256
_STATEMENT_CACHE: Final = 32


# --- the threads ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Job:
    """Work for a connection thread, and where its answer goes."""

    run: Callable[[sqlite3.Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


_Outcome = tuple["asyncio.Future[Any]", Any, BaseException | None]


def _settle(outcomes: list[_Outcome]) -> None:
    """On the caller's loop: hand each job its result (a cancelled caller is skipped)."""
    for future, value, error in outcomes:
        if future.done():
            continue
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)


class _ConnectionThread:
    """A thread that owns one connection and runs the jobs queued for it, in batches.

    A transactional thread (the writer) runs each batch in one ``BEGIN IMMEDIATE`` ...
    ``COMMIT``; if the batch fails, each job is retried in a transaction of its own.
    A plain thread (the reader) runs each job on its own. Either way the results of a
    batch reach each caller's loop in one ``call_soon_threadsafe``.
    """

    def __init__(self, name: str, connection: sqlite3.Connection, *, transactional: bool) -> None:
        self._connection = connection
        self._transactional = transactional
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()  # None: stop
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._stopped = threading.Event()
        self.batches = 0
        self.jobs_done = 0

    def start(self) -> None:
        self._thread.start()

    def submit(self, run: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put(_Job(run, loop, future))
        return future

    async def stop(self) -> None:
        """Finish the queued jobs, close the connection, and end the thread."""
        self._jobs.put(None)
        await asyncio.to_thread(self._stopped.wait)

    def _main(self) -> None:
        try:
            while True:
                batch, stop = self._take_batch()
                if batch:
                    self._deliver(self._outcomes(batch))
                if stop:
                    return
        finally:
            self._connection.close()
            self._stopped.set()

    def _take_batch(self) -> tuple[list[_Job], bool]:
        first = self._jobs.get()
        if first is None:
            return [], True
        batch = [first]
        while len(batch) < _MAX_BATCH:
            try:
                item = self._jobs.get_nowait()
            except queue.Empty:
                break
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    def _outcomes(self, batch: list[_Job]) -> list[tuple[_Job, Any, BaseException | None]]:
        """Run ``batch``; whatever goes wrong, every job gets an answer (none is left
        waiting forever)."""
        try:
            return self._run_batch(batch) if self._transactional else self._each(batch)
        except Exception as exc:  # e.g. MemoryError while building results
            logger.exception("SQLite %s thread failed a batch", self._thread.name)
            return [(job, None, exc) for job in batch]

    def _run_batch(self, batch: list[_Job]) -> list[tuple[_Job, Any, BaseException | None]]:
        """One transaction for the batch. A job that raises is retried alone, so it fails
        by itself; a lock or disk error at BEGIN/COMMIT fails the whole batch at once."""
        connection = self._connection
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            return [(job, None, exc) for job in batch]
        values: list[Any] = []
        for job in batch:
            try:
                values.append(job.run(connection))
            except Exception as exc:
                rollback(connection)
                if len(batch) == 1:
                    return [(job, None, exc)]
                return [outcome for alone in batch for outcome in self._run_batch([alone])]
        try:
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            rollback(connection)
            return [(job, None, exc) for job in batch]
        self.batches += 1
        self.jobs_done += len(batch)
        return [(job, value, None) for job, value in zip(batch, values, strict=True)]

    def _each(self, batch: list[_Job]) -> list[tuple[_Job, Any, BaseException | None]]:
        outcomes: list[tuple[_Job, Any, BaseException | None]] = []
        for job in batch:
            try:
                outcomes.append((job, job.run(self._connection), None))
            except Exception as exc:
                outcomes.append((job, None, exc))
        self.batches += 1
        self.jobs_done += len(batch)
        return outcomes

    @staticmethod
    def _deliver(outcomes: list[tuple[_Job, Any, BaseException | None]]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[_Outcome]] = {}
        for job, value, error in outcomes:
            by_loop.setdefault(job.loop, []).append((job.future, value, error))
        for loop, settled in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle, settled)
            except RuntimeError:  # the caller's loop is closed: nobody is waiting
                continue


def rollback(connection: sqlite3.Connection) -> None:
    if connection.in_transaction:
        try:
            connection.execute("ROLLBACK")
        except sqlite3.Error:
            logger.exception("SQLite rollback failed")


def _connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, busy timeout."""
    connection = sqlite3.connect(
        path,
        isolation_level=None,
        check_same_thread=False,
        cached_statements=_STATEMENT_CACHE,
    )
    try:
        connection.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if read_only:
            connection.execute("PRAGMA query_only = ON")
        else:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        connection.close()
        raise
    return connection


class SQLiteDatabase:
    """One SQLite file opened for the stores: a writer thread and a reader thread.

    Use ``await SQLiteDatabase.open(path)``; ``await db.close()`` finishes the queued
    writes and closes both connections (safe to call twice). After ``close`` every call
    raises ``RuntimeError`` naming the file.
    """

    def __init__(self, path: Path, writer: _ConnectionThread, reader: _ConnectionThread) -> None:
        self.path = path
        self._writer = writer
        self._reader = reader
        self._closed = False

    @classmethod
    async def open(
        cls, path: Path, *, prepare: Callable[[sqlite3.Connection, Path], object]
    ) -> SQLiteDatabase:
        """Open (creating if needed) the file at ``path``, run ``prepare`` on the write
        connection, and start the two threads.

        Raises what ``prepare`` raises, and ``sqlite3.Error`` naming the file if it is not
        a database or cannot be opened.
        """
        try:
            writer_connection = await asyncio.to_thread(_connect, path, read_only=False)
            try:
                await asyncio.to_thread(prepare, writer_connection, path)
                reader_connection = await asyncio.to_thread(_connect, path, read_only=True)
            except BaseException:
                writer_connection.close()
                raise
        except sqlite3.Error as exc:  # sqlite3's messages do not say which file
            raise type(exc)(f"{path}: {exc}") from exc
        writer = _ConnectionThread("llamon-sqlite-writer", writer_connection, transactional=True)
        reader = _ConnectionThread("llamon-sqlite-reader", reader_connection, transactional=False)
        writer.start()
        reader.start()
        return cls(path, writer, reader)

    @property
    def commits(self) -> int:
        """Transactions committed so far."""
        return self._writer.batches

    @property
    def writes(self) -> int:
        """Writes committed so far (``writes / commits`` is the mean batch size)."""
        return self._writer.jobs_done

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"the SQLite store {self.path} is closed")

    async def write(self, *statements: Statement) -> None:
        """Run ``statements`` in the next commit; returns once it is committed."""
        self._check_open()

        def run(connection: sqlite3.Connection) -> None:
            for sql, parameters in statements:
                connection.execute(sql, parameters)

        await self._writer.submit(run)

    async def write_returning(self, run: Callable[[sqlite3.Connection], T]) -> T:
        """``run(connection)`` in the next commit; returns its result once committed."""
        self._check_open()
        return await self._writer.submit(run)

    async def read(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """``query(connection)`` on the reader thread; sees every committed write."""
        self._check_open()
        return await self._reader.submit(query)

    async def close(self) -> None:
        """Finish queued writes, then close both connections."""
        if self._closed:
            return
        self._closed = True
        await self._writer.stop()
        await self._reader.stop()


def fetch_one(sql: str, parameters: Sequence[Any]) -> Callable[[sqlite3.Connection], Any]:
    """A ``read`` query: the first row of ``sql``, or ``None``."""
    return lambda connection: connection.execute(sql, parameters).fetchone()


def fetch_all(sql: str, parameters: Sequence[Any]) -> Callable[[sqlite3.Connection], Any]:
    """A ``read`` query: every row of ``sql``."""
    return lambda connection: connection.execute(sql, parameters).fetchall()
