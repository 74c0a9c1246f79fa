"""The embedded default store: one SQLite file, one writer thread with batched commits.

What the caller sees:

* ``SQLiteTaskStore`` and ``SQLitePushConfigStore`` are a2a-sdk's ``TaskStore`` and
  ``PushNotificationConfigStore`` over one ``SQLiteDatabase`` (``open_stores("sqlite")``
  builds all three). Tables exist when ``SQLiteDatabase.open`` returns.
* ``save`` returns once the task is committed: a process killed at any moment afterwards
  (SIGKILL, OOM) still finds it on restart. The file is in WAL mode with
  ``synchronous=NORMAL``: an operating-system crash or power loss can lose the last
  commits, but never corrupts the file.
* Concurrent writes share commits. The writer thread takes every write waiting in its
  queue and commits them in one transaction (group commit), so throughput grows with
  concurrency instead of queueing on a lock. A write that fails on its own (it cannot,
  short of a corrupt file) is retried alone, so it never takes the others with it.
* Reads run on a reader thread with its own read-only connection. In WAL mode they never
  wait for the writer, and neither thread blocks the event loop.
* Every statement is a fixed string, prepared once per connection (sqlite3's statement
  cache); there is no per-request engine, session, reflection or schema work.
* A task is one row: its id, context, state and owning worker as columns (reconciliation
  finds unfinished tasks through a partial index) and the whole task as JSON.
* A file written by llamon before this store (a2a-sdk's ``tasks`` and
  ``push_notification_configs`` tables) is carried over once, on first open; the old tables
  are left as they were.
* ``SQLiteDatabase.commits`` and ``.writes`` count commits and the writes they carried.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.tasks import PushNotificationConfigStore, TaskStore
from a2a.types import PushNotificationConfig, Task
from pydantic import ValidationError

from llamon_agent.a2a.workers import ORPHAN_STATES, WORKER_METADATA_KEY

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

__all__ = [
    "SQLITE_BUSY_TIMEOUT_MS",
    "SQLITE_SCHEMA_VERSION",
    "SQLiteDatabase",
    "SQLitePushConfigStore",
    "SQLiteTaskStore",
    "Statement",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

Statement = tuple[str, Sequence[Any]]
"""One SQL statement and its parameters."""

SQLITE_BUSY_TIMEOUT_MS: Final = 5_000
"""How long a connection waits for another process's write lock before failing."""

SQLITE_SCHEMA_VERSION: Final = 1
"""``PRAGMA user_version`` of a file this module wrote; a newer file is refused."""

_MAX_BATCH: Final = 256
_STATEMENT_CACHE: Final = 32

_UNFINISHED = ", ".join(f"'{state}'" for state in ORPHAN_STATES)
_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS llamon_tasks (
        id TEXT PRIMARY KEY,
        context_id TEXT NOT NULL,
        state TEXT NOT NULL,
        worker TEXT,
        updated_at REAL NOT NULL,
        task TEXT NOT NULL
    )""",
    f"""CREATE INDEX IF NOT EXISTS llamon_tasks_unfinished
        ON llamon_tasks (id, worker) WHERE state IN ({_UNFINISHED})""",
    """CREATE TABLE IF NOT EXISTS llamon_push_configs (
        task_id TEXT NOT NULL,
        config_id TEXT NOT NULL,
        config BLOB NOT NULL,
        PRIMARY KEY (task_id, config_id)
    )""",
)
_UPSERT_TASK: Final = (
    "INSERT INTO llamon_tasks (id, context_id, state, worker, updated_at, task)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
    " context_id = excluded.context_id, state = excluded.state, worker = excluded.worker,"
    " updated_at = excluded.updated_at, task = excluded.task"
)
_SELECT_TASK: Final = "SELECT task FROM llamon_tasks WHERE id = ?"
_DELETE_TASK: Final = "DELETE FROM llamon_tasks WHERE id = ?"
_SELECT_ORPHANS: Final = (
    f"SELECT id FROM llamon_tasks WHERE state IN ({_UNFINISHED})"  # noqa: S608 - constants
    " AND (worker = ? OR worker IS NULL) ORDER BY id"
)
_UPSERT_PUSH: Final = (
    "INSERT INTO llamon_push_configs (task_id, config_id, config) VALUES (?, ?, ?)"
    " ON CONFLICT (task_id, config_id) DO UPDATE SET config = excluded.config"
)
_SELECT_PUSH: Final = (
    "SELECT config_id, config FROM llamon_push_configs WHERE task_id = ? ORDER BY rowid"
)
_DELETE_PUSH: Final = "DELETE FROM llamon_push_configs WHERE task_id = ?"
_DELETE_PUSH_ONE: Final = "DELETE FROM llamon_push_configs WHERE task_id = ? AND config_id = ?"

_A2A_TASKS: Final = "SELECT id, context_id, kind, status, artifacts, history, metadata FROM tasks"
_A2A_PUSH: Final = (
    "INSERT OR IGNORE INTO llamon_push_configs (task_id, config_id, config)"
    " SELECT task_id, config_id, config_data FROM push_notification_configs"
)


# --- the threads ---------------------------------------------------------------------------


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
                _rollback(connection)
                if len(batch) == 1:
                    return [(job, None, exc)]
                return [outcome for alone in batch for outcome in self._run_batch([alone])]
        try:
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback(connection)
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


def _rollback(connection: sqlite3.Connection) -> None:
    if connection.in_transaction:
        try:
            connection.execute("ROLLBACK")
        except sqlite3.Error:
            logger.exception("SQLite rollback failed")


# --- the database ----------------------------------------------------------------------------


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


def _prepare_file(connection: sqlite3.Connection, path: Path) -> int:
    """Create or check the schema, carrying over a2a-sdk tables; returns tasks carried."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > SQLITE_SCHEMA_VERSION:
            raise ValueError(
                f"{path} was written by a newer llamon (schema version {version}; this one"
                f" reads up to {SQLITE_SCHEMA_VERSION}): upgrade llamon-agent, or point"
                " LLAMON_HOME at another directory"
            )
        for statement in _SCHEMA:
            connection.execute(statement)
        carried = _carry_over_a2a_tables(connection) if version == 0 else 0
        connection.execute(f"PRAGMA user_version = {SQLITE_SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        _rollback(connection)
        raise
    return carried


def _carry_over_a2a_tables(connection: sqlite3.Connection) -> int:
    """Copy the tasks and push configs of a2a-sdk's tables into ours (first open only)."""
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    carried = skipped = 0
    if "tasks" in tables:
        for row in connection.execute(_A2A_TASKS).fetchall():
            task = _task_from_a2a_row(row)
            if task is None:
                skipped += 1
                continue
            connection.execute(_UPSERT_TASK, _task_row(task))
            carried += 1
    if "push_notification_configs" in tables:
        connection.execute(_A2A_PUSH)
    if carried or skipped:
        logger.info(
            "carried %d task(s) over from a2a-sdk's tables (%d unreadable, left there)",
            carried,
            skipped,
        )
    return carried


def _task_from_a2a_row(row: tuple[Any, ...]) -> Task | None:
    task_id, context_id, kind, status, artifacts, history, metadata = row

    def loaded(value: Any) -> Any:
        return json.loads(value) if isinstance(value, str | bytes) else value

    try:
        return Task.model_validate(
            {
                "id": task_id,
                "context_id": context_id,
                "kind": kind,
                "status": loaded(status),
                "artifacts": loaded(artifacts),
                "history": loaded(history),
                "metadata": loaded(metadata),
            }
        )
    except (ValidationError, ValueError):
        return None


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
    async def open(cls, path: Path) -> SQLiteDatabase:
        """Open (creating if needed) the file at ``path`` and start its two threads.

        Raises ``ValueError`` if the file was written by a newer llamon, and
        ``sqlite3.Error`` naming the file if it is not a database or cannot be opened.
        """
        try:
            writer_connection = await asyncio.to_thread(_connect, path, read_only=False)
            try:
                await asyncio.to_thread(_prepare_file, writer_connection, path)
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


def _fetch_one(sql: str, parameters: Sequence[Any]) -> Callable[[sqlite3.Connection], Any]:
    return lambda connection: connection.execute(sql, parameters).fetchone()


def _fetch_all(sql: str, parameters: Sequence[Any]) -> Callable[[sqlite3.Connection], Any]:
    return lambda connection: connection.execute(sql, parameters).fetchall()


# --- the stores ------------------------------------------------------------------------------


def _task_row(task: Task) -> tuple[Any, ...]:
    worker = (task.metadata or {}).get(WORKER_METADATA_KEY)
    return (
        task.id,
        task.context_id,
        task.status.state.value,
        worker if isinstance(worker, str) else None,
        time.time(),
        task.model_dump_json(),
    )


class SQLiteTaskStore(TaskStore):
    """a2a-sdk's ``TaskStore`` on a ``SQLiteDatabase``: one row per task, the task as JSON."""

    def __init__(self, database: SQLiteDatabase) -> None:
        self.database = database

    async def save(self, task: Task, context: ServerCallContext | None = None) -> None:
        """Insert or replace ``task``; returns once it is committed."""
        await self.database.write((_UPSERT_TASK, _task_row(task)))

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        """The task saved last under ``task_id``, or ``None``."""
        row = await self.database.read(_fetch_one(_SELECT_TASK, (task_id,)))
        return None if row is None else Task.model_validate_json(row[0])

    async def delete(self, task_id: str, context: ServerCallContext | None = None) -> None:
        """Remove the task (a no-op for an unknown id)."""
        await self.database.write((_DELETE_TASK, (task_id,)))

    async def unfinished_task_ids(self, worker: str) -> list[str]:
        """Ids of ``submitted``/``working`` tasks stamped by ``worker`` or not stamped, sorted.

        Served by a partial index: its cost grows with the unfinished tasks, not the table.
        """
        rows = await self.database.read(_fetch_all(_SELECT_ORPHANS, (worker,)))
        return [row[0] for row in rows]


class SQLitePushConfigStore(PushNotificationConfigStore):
    """a2a-sdk's ``PushNotificationConfigStore`` on a ``SQLiteDatabase``.

    With ``encryption_key`` (a Fernet key) each config is encrypted at rest; a row that
    does not decrypt is read as plain JSON if it is (written before the key was set), else
    skipped with an error log naming the task and config ids (never the URL or token).
    ``delete_info(task_id)`` without a config id deletes all of the task's configs.
    """

    def __init__(self, database: SQLiteDatabase, encryption_key: bytes | None = None) -> None:
        self.database = database
        self._fernet = _fernet(encryption_key) if encryption_key is not None else None

    async def set_info(self, task_id: str, notification_config: PushNotificationConfig) -> None:
        """Insert or replace the config; an id-less config gets the task id as its id."""
        config_id = notification_config.id or task_id
        config = notification_config.model_copy(update={"id": config_id})
        payload = config.model_dump_json().encode()
        if self._fernet is not None:
            payload = self._fernet.encrypt(payload)
        await self.database.write((_UPSERT_PUSH, (task_id, config_id, payload)))

    async def get_info(self, task_id: str) -> list[PushNotificationConfig]:
        """The task's configs, in the order they were first set."""
        rows = await self.database.read(_fetch_all(_SELECT_PUSH, (task_id,)))
        configs = (self._decode(task_id, config_id, payload) for config_id, payload in rows)
        return [config for config in configs if config is not None]

    async def delete_info(self, task_id: str, config_id: str | None = None) -> None:
        """Delete one config, or all of the task's when ``config_id`` is ``None``."""
        if config_id is None:
            await self.database.write((_DELETE_PUSH, (task_id,)))
        else:
            await self.database.write((_DELETE_PUSH_ONE, (task_id, config_id)))

    def _decode(
        self, task_id: str, config_id: str, payload: bytes
    ) -> PushNotificationConfig | None:
        if self._fernet is not None:
            from cryptography.fernet import InvalidToken

            with contextlib.suppress(InvalidToken):  # else maybe stored before the key
                payload = self._fernet.decrypt(payload)
        try:
            return PushNotificationConfig.model_validate_json(payload)
        except ValidationError:
            logger.error(
                "push config %r of task %r is unreadable (wrong encryption key or corrupt)",
                config_id,
                task_id,
            )
            return None


def _fernet(key: bytes) -> Fernet:
    try:
        from cryptography.fernet import Fernet
    except ImportError:  # pragma: no cover - cryptography comes with a2a-sdk's extras
        raise ValueError(
            "push_encryption_key needs the 'cryptography' package: pip install cryptography"
        ) from None
    try:
        return Fernet(key)
    except (ValueError, TypeError):
        raise ValueError(
            "push_encryption_key must be a Fernet key (Fernet.generate_key():"
            " 32 url-safe base64-encoded bytes)"
        ) from None
