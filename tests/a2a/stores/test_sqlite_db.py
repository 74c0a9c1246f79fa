"""``SQLiteDatabase`` on its own: group commit, a failing write fails alone, reads beside
a writer, where a write commits (the event loop or the writer thread), close, and open
errors. A one-table schema stands in for the stores'."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from llamon_agent.a2a.stores.sqlite_db import (
    LOOP_BATCH_BYTES,
    SQLITE_BUSY_TIMEOUT_MS,
    SQLiteDatabase,
    fetch_all,
    fetch_one,
)

WAIT = 10.0
INSERT = "INSERT INTO notes (id, body) VALUES (?, ?)"


def _schema(connection: sqlite3.Connection, path: Path) -> None:
    connection.execute("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT)")


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[SQLiteDatabase]:
    opened = await SQLiteDatabase.open(tmp_path / "notes.db", prepare=_schema)
    yield opened
    await opened.close()


async def _bodies(database: SQLiteDatabase) -> list[str]:
    rows = await database.read(fetch_all("SELECT body FROM notes ORDER BY id", ()))
    return [row[0] for row in rows]


async def test_concurrent_writes_share_commits(database: SQLiteDatabase) -> None:
    writes = [database.write((INSERT, (i, f"note {i}"))) for i in range(300)]
    await asyncio.wait_for(asyncio.gather(*writes), WAIT)

    assert database.writes == 300
    assert database.commits < 300  # group commit: the queued writes share transactions
    assert await _bodies(database) == [f"note {i}" for i in range(300)]


async def test_a_write_is_committed_when_it_returns(
    database: SQLiteDatabase, tmp_path: Path
) -> None:
    await database.write((INSERT, (1, "kept")), (INSERT, (2, "with it")))
    with sqlite3.connect(tmp_path / "notes.db") as other:  # as another process would
        assert other.execute("SELECT body FROM notes ORDER BY id").fetchall() == [
            ("kept",),
            ("with it",),
        ]


async def test_a_failing_write_fails_alone(database: SQLiteDatabase) -> None:
    good = [database.write((INSERT, (i, f"ok {i}"))) for i in range(20)]
    duplicate = database.write((INSERT, (0, "same id again")))

    results = await asyncio.wait_for(asyncio.gather(*good, duplicate, return_exceptions=True), WAIT)

    assert results[:20] == [None] * 20
    assert isinstance(results[20], sqlite3.IntegrityError)
    assert await _bodies(database) == [f"ok {i}" for i in range(20)]


async def test_all_statements_of_a_write_commit_or_none(database: SQLiteDatabase) -> None:
    with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
        await database.write((INSERT, (1, "first")), ("INSERT INTO no_such_table VALUES (1)", ()))
    assert await _bodies(database) == []


async def test_a_read_does_not_wait_for_another_writer(
    database: SQLiteDatabase, tmp_path: Path
) -> None:
    await database.write((INSERT, (1, "committed")))
    other = sqlite3.connect(tmp_path / "notes.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock...
        other.execute("UPDATE notes SET body = 'not yet'")
        # ...and a read is answered from the last commit at once
        row = await asyncio.wait_for(database.read(fetch_one("SELECT body FROM notes", ())), 2.0)
        assert row == ("committed",)
    finally:
        other.execute("ROLLBACK")
        other.close()


async def test_connections_use_wal_and_the_busy_timeout(database: SQLiteDatabase) -> None:
    settings = await database.read(
        lambda connection: (
            connection.execute("PRAGMA journal_mode").fetchone()[0],
            connection.execute("PRAGMA busy_timeout").fetchone()[0],
            connection.execute("PRAGMA query_only").fetchone()[0],
        )
    )
    assert settings == ("wal", SQLITE_BUSY_TIMEOUT_MS, 1)  # the reader cannot write


async def test_close_commits_what_is_queued_then_refuses(tmp_path: Path) -> None:
    database = await SQLiteDatabase.open(tmp_path / "notes.db", prepare=_schema)
    writes = [database.write((INSERT, (i, str(i)))) for i in range(50)]
    await asyncio.wait_for(asyncio.gather(*writes, database.close()), WAIT)
    await database.close()  # twice is fine

    with pytest.raises(RuntimeError, match=r"the SQLite store .*notes\.db is closed"):
        await database.write((INSERT, (99, "late")))
    with sqlite3.connect(tmp_path / "notes.db") as other:
        assert other.execute("SELECT count(*) FROM notes").fetchone() == (50,)


async def test_what_prepare_raises_is_raised(tmp_path: Path) -> None:
    def refuse(connection: sqlite3.Connection, path: Path) -> None:
        raise ValueError(f"{path} is not ours")

    with pytest.raises(ValueError, match="is not ours"):
        await SQLiteDatabase.open(tmp_path / "notes.db", prepare=refuse)


# --- where a write commits: the event loop while the file is free, else the writer thread ---


async def test_a_write_on_a_free_file_commits_on_the_event_loop(
    database: SQLiteDatabase, tmp_path: Path
) -> None:
    await database.write((INSERT, (1, "on the loop")))

    assert (database.loop_commits, database.commits, database.writes) == (1, 1, 1)
    with sqlite3.connect(tmp_path / "notes.db") as other:  # committed, as another process sees
        assert other.execute("SELECT body FROM notes").fetchall() == [("on the loop",)]


async def test_the_loops_connection_never_waits_for_a_lock(database: SQLiteDatabase) -> None:
    settings = await database.read(
        lambda connection: (
            threading.current_thread() is threading.main_thread(),
            connection.execute("PRAGMA busy_timeout").fetchone()[0],
            connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0],
        ),
        small=True,
    )
    assert settings == (True, 0, 0)  # on the loop; no busy wait; checkpoints by the writer


async def test_a_read_not_marked_small_runs_on_the_reader_thread(
    database: SQLiteDatabase,
) -> None:
    name = await database.read(lambda connection: threading.current_thread().name)
    assert name == "llamon-sqlite-reader"


async def test_a_write_while_another_process_holds_the_lock_waits_on_the_writer_thread(
    database: SQLiteDatabase, tmp_path: Path
) -> None:
    other = sqlite3.connect(tmp_path / "notes.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        write = asyncio.create_task(database.write((INSERT, (1, "after the lock"))))
        for _ in range(5):  # a few turns of the loop: the write tries the file, finds it locked
            await asyncio.sleep(0)
        # the loop is not blocked: a small read is answered while the write waits
        assert await database.read(fetch_all("SELECT body FROM notes", ()), small=True) == []
        assert not write.done()
        other.execute("COMMIT")
        await asyncio.wait_for(write, WAIT)
    finally:
        other.close()

    assert database.loop_commits == 0  # the writer thread committed it
    assert await _bodies(database) == ["after the lock"]
    await database.write((INSERT, (2, "next")))  # the file is free again: back on the loop
    assert database.loop_commits == 1


async def test_writes_commit_in_the_order_they_were_made(database: SQLiteDatabase) -> None:
    upsert = "INSERT INTO notes (id, body) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET body = ?"
    started, release = threading.Event(), threading.Event()

    def slow(connection: sqlite3.Connection) -> None:
        started.set()
        release.wait(WAIT)
        connection.execute(upsert, ("first", "first"))

    first = asyncio.create_task(database.write_returning(slow))
    await asyncio.wait_for(asyncio.to_thread(started.wait, WAIT), WAIT)
    second = asyncio.create_task(database.write_returning(lambda c: c.execute(upsert, ("2", "2"))))
    third = asyncio.create_task(database.write((upsert, ("third", "third"))))
    await asyncio.sleep(0)
    release.set()
    await asyncio.wait_for(asyncio.gather(first, second, third), WAIT)

    assert await _bodies(database) == ["third"]


async def test_a_large_write_commits_on_the_writer_thread(database: SQLiteDatabase) -> None:
    await database.write((INSERT, (1, "x" * (LOOP_BATCH_BYTES + 1))))
    assert (database.loop_commits, database.commits) == (0, 1)


async def test_a_failing_write_on_the_loop_fails_alone(database: SQLiteDatabase) -> None:
    await database.write((INSERT, (1, "first")))
    results = await asyncio.wait_for(
        asyncio.gather(
            database.write((INSERT, (2, "kept"))),
            database.write((INSERT, (1, "same id again"))),
            return_exceptions=True,
        ),
        WAIT,
    )
    assert results[0] is None
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert await _bodies(database) == ["first", "kept"]
    await database.write((INSERT, (3, "next")))  # and the next write is answered
    assert await _bodies(database) == ["first", "kept", "next"]


async def test_the_log_is_checkpointed_while_writes_commit_on_the_loop(
    database: SQLiteDatabase, tmp_path: Path
) -> None:
    for i in range(2_000):  # one commit each; unchecked, the log would grow past 10 MB
        await database.write((INSERT, (i, f"note {i}")))

    assert database.writes == 2_000
    assert database.loop_commits > 1_000  # most; those made during a checkpoint queue behind it
    assert (tmp_path / "notes.db-wal").stat().st_size < 4 * 1024 * 1024
