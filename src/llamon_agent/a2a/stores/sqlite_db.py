"""One SQLite file served by the event loop when it is free, and by two threads otherwise.

What the caller sees:

* ``await SQLiteDatabase.open(path, prepare=...)`` opens (creating if needed) the file,
  runs ``prepare(connection, path)`` once on the write connection (schema work), and
  starts the threads; ``await db.close()`` commits the writes already queued, then closes
  the connections (safe to call twice; afterwards every call raises ``RuntimeError``
  naming the file). Open errors are ``sqlite3.Error`` naming the file.
* ``await db.write(*statements)`` returns once its statements are committed. Writes that
  arrive in the same turn of the event loop are committed in one transaction (group
  commit), so throughput grows with concurrency instead of queueing on a lock. A write
  that raises is retried alone, so it never takes the others with it; a lock or disk
  error at BEGIN/COMMIT fails its batch at once. Whatever goes wrong, every caller gets an
  answer.
* Where a batch is committed: on the event loop itself when that cannot wait -- the file's
  write lock is free (the loop's connection has no busy timeout: a lock held by another
  process sends the batch to the writer thread at once), the writer thread has nothing
  queued (so writes commit in the order they were made), and the batch is small
  (``LOOP_BATCH_BYTES``). A commit there appends a few pages to the write-ahead log
  without syncing (tens of microseconds); checkpoints, which sync, run on the writer
  thread. Every other batch, and every ``write_returning`` not marked ``small``, runs on
  the writer thread, which waits for a lock up to ``SQLITE_BUSY_TIMEOUT_MS``.
* ``await db.read(query)`` runs ``query(connection)`` on the reader thread's read-only
  connection. In WAL mode a read never waits for a writer (this process's or another's).
  ``read(query, small=True)`` (a lookup of a few rows by an index) runs on the event loop
  instead, falling back to the reader thread if the file is locked.
* Connections: autocommit with explicit transactions, WAL, ``synchronous=NORMAL`` (a
  process killed at any moment loses nothing ``write`` returned for; a power loss can lose
  the last commits, never corrupt the file), ``busy_timeout`` ``SQLITE_BUSY_TIMEOUT_MS``
  on the threads' connections, and sqlite3's statement cache, so fixed SQL strings are
  prepared once per connection.
* ``db.commits`` and ``db.writes`` count commits and the writes they carried;
  ``db.loop_commits`` the commits made on the event loop.
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
    "LOOP_BATCH_BYTES",
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

LOOP_BATCH_BYTES: Final = 256 * 1024
"""A batch whose parameters hold more text or bytes than this commits on the writer thread."""

_MAX_BATCH: Final = 256
_STATEMENT_CACHE: Final = 32
_CHECKPOINT_EVERY: Final = 200
"""Commits on the event loop between checkpoints (the loop's connection never checkpoints:
a checkpoint syncs the file, so the writer thread runs it)."""
_LOCKED: Final = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED


# --- the threads ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Job:
    """Work for a connection thread, and where its answer goes."""

    run: Callable[[sqlite3.Connection], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


_Outcome = tuple["asyncio.Future[Any]", Any, BaseException | None]
_CHECKPOINT: Final = "checkpoint"


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
        # None: stop; _CHECKPOINT: checkpoint the write-ahead log
        self._jobs: queue.SimpleQueue[_Job | str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._stopped = threading.Event()
        self._unfinished = 0  # jobs queued or running; under _count_lock
        self._count_lock = threading.Lock()
        self.batches = 0
        self.jobs_done = 0

    @property
    def idle(self) -> bool:
        """No job is queued or running (every job submitted so far is committed)."""
        return self._unfinished == 0

    def start(self) -> None:
        self._thread.start()

    def submit(self, run: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self.submit_job(_Job(run, loop, future))
        return future

    def submit_job(self, job: _Job) -> None:
        with self._count_lock:
            self._unfinished += 1
        self._jobs.put(job)

    def checkpoint(self) -> None:
        """Checkpoint the write-ahead log after the queued jobs (``PASSIVE``: it never
        waits for a lock). The thread counts as busy until it is done, so the writes made
        meanwhile queue behind it and the first of them starts the log afresh."""
        with self._count_lock:
            self._unfinished += 1
        self._jobs.put(_CHECKPOINT)

    async def stop(self) -> None:
        """Finish the queued jobs, close the connection, and end the thread."""
        self._jobs.put(None)
        await asyncio.to_thread(self._stopped.wait)

    def _main(self) -> None:
        try:
            while True:
                batch, stop, checkpoint = self._take_batch()
                if batch:
                    outcomes = self._outcomes(batch)
                    with self._count_lock:
                        self._unfinished -= len(batch)
                    self._deliver(outcomes)
                if checkpoint:
                    self._checkpoint()
                    with self._count_lock:
                        self._unfinished -= checkpoint
                if stop:
                    return
        finally:
            self._connection.close()
            self._stopped.set()

    def _take_batch(self) -> tuple[list[_Job], bool, int]:
        """The next jobs (up to ``_MAX_BATCH``), whether to stop after them, and how many
        checkpoints were asked for meanwhile (one is run after the jobs)."""
        batch: list[_Job] = []
        checkpoint = 0
        item = self._jobs.get()
        while True:
            if item is None:
                return batch, True, checkpoint
            if isinstance(item, _Job):
                batch.append(item)
            else:
                checkpoint += 1
            if len(batch) >= _MAX_BATCH:
                return batch, False, checkpoint
            try:
                item = self._jobs.get_nowait()
            except queue.Empty:
                return batch, False, checkpoint

    def _checkpoint(self) -> None:
        try:
            self._connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:
            logger.warning("SQLite checkpoint failed; the next one retries", exc_info=True)

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


def _connect(path: Path, *, read_only: bool, on_loop: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, busy timeout.

    The event loop's connection (``on_loop``) never waits for a lock (busy timeout 0) and
    never checkpoints (the writer thread does).
    """
    connection = sqlite3.connect(
        path,
        isolation_level=None,
        check_same_thread=False,
        cached_statements=_STATEMENT_CACHE,
    )
    try:
        connection.execute(f"PRAGMA busy_timeout = {0 if on_loop else SQLITE_BUSY_TIMEOUT_MS}")
        if read_only:
            connection.execute("PRAGMA query_only = ON")
        else:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
        if on_loop:
            connection.execute("PRAGMA wal_autocheckpoint = 0")
    except BaseException:
        connection.close()
        raise
    return connection


def _locked(exc: sqlite3.Error) -> bool:
    """``exc`` says the file (or a table) is locked by another connection."""
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _LOCKED


def _parameter_bytes(statements: Sequence[Statement]) -> int:
    size = 0
    for _, parameters in statements:
        values = parameters.values() if isinstance(parameters, Mapping) else parameters
        for value in values:
            if isinstance(value, str | bytes):
                size += len(value)
    return size


class _LoopWriter:
    """Commits small batches on the event loop that opened the file, when nothing waits.

    Writes made in one turn of the loop gather in a batch, committed by a callback at the
    end of the turn. The batch goes to the writer thread instead when the thread has
    unfinished jobs (order), the batch is large, the file is locked, or anything in it
    fails (the thread then retries each write alone and answers the failures).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        connection: sqlite3.Connection,
        writer: _ConnectionThread,
    ) -> None:
        self.loop = loop
        self.connection = connection
        self._writer = writer
        self._batch: list[_Job] = []
        self._bytes = 0
        self.commits = 0
        self.writes = 0

    def add(self, run: Callable[[sqlite3.Connection], Any], size: int) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = self.loop.create_future()
        if not self._batch:
            self.loop.call_soon(self._commit)
        self._batch.append(_Job(run, self.loop, future))
        self._bytes += size
        return future

    def hand_over(self) -> None:
        """Queue the gathered batch on the writer thread (before anything queued later)."""
        batch, self._batch, self._bytes = self._batch, [], 0
        for job in batch:
            self._writer.submit_job(job)

    def _commit(self) -> None:
        if not self._batch:
            return
        if not self._writer.idle or self._bytes > LOOP_BATCH_BYTES:
            self.hand_over()
            return
        batch, self._batch, self._bytes = self._batch, [], 0
        values = self._run(batch)
        if values is None:
            for job in batch:
                self._writer.submit_job(job)
            return
        self.commits += 1
        self.writes += len(batch)
        if self.commits % _CHECKPOINT_EVERY == 0:
            self._writer.checkpoint()
        _settle([(job.future, value, None) for job, value in zip(batch, values, strict=True)])

    def _run(self, batch: list[_Job]) -> list[Any] | None:
        """The batch's results, committed; ``None`` if nothing was committed."""
        connection = self.connection
        try:
            connection.execute("BEGIN IMMEDIATE")
            values = [job.run(connection) for job in batch]
            connection.execute("COMMIT")
        except Exception as exc:
            rollback(connection)
            if isinstance(exc, sqlite3.Error) and not _locked(exc):
                logger.debug("SQLite batch failed on the event loop; the writer retries it")
            return None
        except BaseException:
            rollback(connection)
            raise
        return values


class SQLiteDatabase:
    """One SQLite file opened for the stores (see the module docstring for where each
    statement runs).

    Use ``await SQLiteDatabase.open(path)``; ``await db.close()`` finishes the queued
    writes and closes the connections (safe to call twice). After ``close`` every call
    raises ``RuntimeError`` naming the file.
    """

    def __init__(
        self,
        path: Path,
        writer: _ConnectionThread,
        reader: _ConnectionThread,
        loop_writer: _LoopWriter,
    ) -> None:
        self.path = path
        self._writer = writer
        self._reader = reader
        self._loop_writer = loop_writer
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
        opened: list[sqlite3.Connection] = []
        try:
            try:
                opened.append(await asyncio.to_thread(_connect, path, read_only=False))
                await asyncio.to_thread(prepare, opened[0], path)
                opened.append(await asyncio.to_thread(_connect, path, read_only=True))
                opened.append(
                    await asyncio.to_thread(_connect, path, read_only=False, on_loop=True)
                )
            except sqlite3.Error as exc:  # sqlite3's messages do not say which file
                raise type(exc)(f"{path}: {exc}") from exc
        except BaseException:
            for connection in opened:
                connection.close()
            raise
        writer_connection, reader_connection, loop_connection = opened
        writer = _ConnectionThread("llamon-sqlite-writer", writer_connection, transactional=True)
        reader = _ConnectionThread("llamon-sqlite-reader", reader_connection, transactional=False)
        writer.start()
        reader.start()
        loop_writer = _LoopWriter(asyncio.get_running_loop(), loop_connection, writer)
        return cls(path, writer, reader, loop_writer)

    @property
    def commits(self) -> int:
        """Transactions committed so far."""
        return self._writer.batches + self._loop_writer.commits

    @property
    def writes(self) -> int:
        """Writes committed so far (``writes / commits`` is the mean batch size)."""
        return self._writer.jobs_done + self._loop_writer.writes

    @property
    def loop_commits(self) -> int:
        """Transactions committed on the event loop so far (the rest: the writer thread)."""
        return self._loop_writer.commits

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"the SQLite store {self.path} is closed")

    def _on_home_loop(self) -> bool:
        return asyncio.get_running_loop() is self._loop_writer.loop

    async def write(self, *statements: Statement) -> None:
        """Run ``statements`` in the next commit; returns once it is committed.

        Keep each statement to a few rows by key: a write may commit on the event loop.
        """
        self._check_open()

        def run(connection: sqlite3.Connection) -> None:
            for sql, parameters in statements:
                connection.execute(sql, parameters)

        if self._on_home_loop():
            await self._loop_writer.add(run, _parameter_bytes(statements))
        else:
            await self._writer.submit(run)

    async def write_returning(
        self, run: Callable[[sqlite3.Connection], T], *, small: bool = False
    ) -> T:
        """``run(connection)`` in the next commit; returns its result once committed.

        ``small=True`` says ``run`` touches a few rows by key, so it may commit on the
        event loop; otherwise it runs on the writer thread.
        """
        self._check_open()
        if not self._on_home_loop():
            return await self._writer.submit(run)
        if small:
            result: T = await self._loop_writer.add(run, 0)
            return result
        self._loop_writer.hand_over()  # what was written before commits before it
        return await self._writer.submit(run)

    async def read(self, query: Callable[[sqlite3.Connection], T], *, small: bool = False) -> T:
        """``query(connection)``; sees every committed write.

        Runs on the reader thread, or with ``small=True`` (a lookup of a few rows by an
        index) on the event loop, unless the file is locked.
        """
        self._check_open()
        if small and self._on_home_loop():
            try:
                return query(self._loop_writer.connection)
            except sqlite3.OperationalError:
                pass  # locked, or the reader thread gives the same error to raise
        return await self._reader.submit(query)

    async def close(self) -> None:
        """Finish queued writes, then close the connections."""
        if self._closed:
            return
        self._closed = True
        self._loop_writer.hand_over()
        await self._writer.stop()
        await self._reader.stop()
        self._loop_writer.connection.close()


def fetch_one(sql: str, parameters: Sequence[Any]) -> Callable[[sqlite3.Connection], Any]:
    """A ``read`` query: the first row of ``sql``, or ``None``."""
    return lambda connection: connection.execute(sql, parameters).fetchone()


def fetch_all(sql: str, parameters: Sequence[Any]) -> Callable[[sqlite3.Connection], Any]:
    """A ``read`` query: every row of ``sql``."""
    return lambda connection: connection.execute(sql, parameters).fetchall()
