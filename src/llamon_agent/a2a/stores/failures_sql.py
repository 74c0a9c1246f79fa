"""The failure store in a database: the ``llamon_failures`` table on SQLite and PostgreSQL.

What the caller sees:

* ``SQLiteFailureStore(database)`` writes through the ``SQLiteDatabase`` the task store
  uses, so a failure joins the writer's next batched commit, and reads on its reader
  thread. The table and its indexes are part of the SQLite schema (``SQLITE_FAILURE_SCHEMA``,
  created by ``open_sqlite_database``).
* ``PostgresFailureStore(engine)`` uses the engine of the PostgreSQL task store;
  ``await create_postgres_failure_table(connection)`` creates the table and indexes.
* Both run the same SQL (named parameters): one index per filterable column, each with the
  time, so a filter plus a time range plus newest-first order reads only the rows returned;
  ``group_by`` counts from the same indexes, and so does ``histogram`` (one ``GROUP BY``
  of the time slice and errorCode over the rows in range).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from llamon_agent.a2a.stores.failures import (
    FailureCount,
    FailureHistogram,
    FailurePage,
    FailureQuery,
    FailureStore,
    GroupField,
    StoredFailure,
    check_buckets,
    check_group_field,
    decode_cursor,
    empty_histogram,
    histogram_of,
    histogram_range,
    page_of,
    sort_counts,
    valid_failure_id,
)
from llamon_agent.a2a.stores.retention import (
    FailureRetention,
    prune_statements,
    sqlite_prune_job,
)

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

    from llamon_agent.a2a.stores.sqlite_db import SQLiteDatabase

__all__ = [
    "FAILURE_TABLE",
    "SQLITE_FAILURE_SCHEMA",
    "PostgresFailureStore",
    "SQLiteFailureStore",
    "create_postgres_failure_table",
]

FAILURE_TABLE: Final = "llamon_failures"

_COLUMNS: Final = (
    "time",
    "task_id",
    "context_id",
    "agent",
    "error_code",
    "stage",
    "reason",
    "tool",
    "node",
    "incident_id",
    "retryable",
    "message",
    "operator_action",
    "evidence",
)
_INDEXED: Final = ("error_code", "stage", "reason", "tool", "agent", "node")


def _table(id_column: str, boolean: str, real: str) -> str:
    return f"""CREATE TABLE IF NOT EXISTS {FAILURE_TABLE} (
        id {id_column},
        time {real} NOT NULL,
        task_id TEXT NOT NULL,
        context_id TEXT,
        agent TEXT,
        error_code TEXT NOT NULL,
        stage TEXT NOT NULL,
        reason TEXT NOT NULL,
        tool TEXT,
        node TEXT,
        incident_id TEXT,
        retryable {boolean} NOT NULL,
        message TEXT NOT NULL,
        operator_action TEXT NOT NULL,
        evidence TEXT NOT NULL
    )"""


_INDEXES: Final = (
    f"CREATE INDEX IF NOT EXISTS {FAILURE_TABLE}_time ON {FAILURE_TABLE} (time)",
    f"CREATE INDEX IF NOT EXISTS {FAILURE_TABLE}_task ON {FAILURE_TABLE} (task_id)",
    *(
        f"CREATE INDEX IF NOT EXISTS {FAILURE_TABLE}_{column} ON {FAILURE_TABLE} ({column}, time)"
        for column in _INDEXED
    ),
)

SQLITE_FAILURE_SCHEMA: Final = (_table("INTEGER PRIMARY KEY", "INTEGER", "REAL"), *_INDEXES)
"""The SQLite statements that create the failure table and its indexes (idempotent)."""
_POSTGRES_SCHEMA: Final = (
    _table("BIGSERIAL PRIMARY KEY", "BOOLEAN", "DOUBLE PRECISION"),
    *_INDEXES,
)

_INSERT: Final = (
    f"INSERT INTO {FAILURE_TABLE} ({', '.join(_COLUMNS)})"  # noqa: S608 - constants
    f" VALUES ({', '.join(':' + column for column in _COLUMNS)})"
)
_SELECT: Final = f"SELECT id, {', '.join(_COLUMNS)} FROM {FAILURE_TABLE}"  # noqa: S608
_SELECT_ONE: Final = f"{_SELECT} WHERE id = :id"


def _params(failure: StoredFailure) -> dict[str, Any]:
    return {
        "time": failure.timestamp,
        "task_id": failure.task_id,
        "context_id": failure.context_id,
        "agent": failure.agent,
        "error_code": failure.error_code,
        "stage": failure.stage,
        "reason": failure.reason,
        "tool": failure.tool,
        "node": failure.node,
        "incident_id": failure.incident_id,
        "retryable": failure.retryable,
        "message": failure.message,
        "operator_action": failure.operator_action,
        "evidence": json.dumps(dict(failure.evidence), ensure_ascii=False, default=str),
    }


def _where(query: FailureQuery, *, paged: bool) -> tuple[str, dict[str, Any]]:
    """The ``WHERE`` clause (or ``""``) and its parameters for ``query``."""
    conditions: list[str] = []
    params: dict[str, Any] = {}
    for column, value in query.equals().items():  # column names are our own constants
        conditions.append(f"{column} = :{column}")
        params[column] = value
    since, until = query.time_range()
    if since is not None:
        conditions.append("time >= :since")
        params["since"] = since
    if until is not None:
        conditions.append("time < :until")
        params["until"] = until
    if paged and query.cursor is not None:
        params["cursor_time"], params["cursor_id"] = decode_cursor(query.cursor)
        conditions.append("(time < :cursor_time OR (time = :cursor_time AND id < :cursor_id))")
    return (" WHERE " + " AND ".join(conditions)) if conditions else "", params


def _select(query: FailureQuery) -> tuple[str, dict[str, Any]]:
    where, params = _where(query, paged=True)
    params["limit"] = query.limit + 1
    return f"{_SELECT}{where} ORDER BY time DESC, id DESC LIMIT :limit", params


def _group(field: GroupField | str, query: FailureQuery) -> tuple[str, dict[str, Any]]:
    column = check_group_field(field)
    where, params = _where(query, paged=False)
    sql = f"SELECT {column}, COUNT(*) FROM {FAILURE_TABLE}{where} GROUP BY {column}"  # noqa: S608
    return sql, params


_FLOOR: Final = {
    # rows are at or after :start, so truncation is the floor; SQLite's FLOOR() is an
    # optional build feature, CAST is not
    "sqlite": "CAST((time - :start) / :width AS INTEGER)",
    "postgresql": "FLOOR((time - :start) / :width)",
}


def _oldest(query: FailureQuery) -> tuple[str, dict[str, Any]]:
    where, params = _where(query, paged=False)
    return f"SELECT MIN(time) FROM {FAILURE_TABLE}{where}", params  # noqa: S608


def _slices(
    query: FailureQuery, dialect: str, start: float, width: float
) -> tuple[str, dict[str, Any]]:
    """Counts per (slice, errorCode) of the rows matching ``query`` from ``start``."""
    where, params = _where(query, paged=False)
    where += (" AND " if where else " WHERE ") + "time >= :start"
    params.update(start=start, width=width)
    bucket = _FLOOR[dialect]
    sql = (
        f"SELECT {bucket} AS slice, error_code, COUNT(*) FROM {FAILURE_TABLE}{where}"  # noqa: S608
        " GROUP BY slice, error_code"
    )
    return sql, params


def _row(values: Sequence[Any]) -> StoredFailure:
    (row_id, moment, task_id, context_id, agent, code, stage, reason, tool, node, incident,
     retryable, message, action, evidence) = values  # fmt: skip
    return StoredFailure(
        id=int(row_id),
        time=datetime.fromtimestamp(float(moment), UTC),
        task_id=task_id,
        context_id=context_id,
        agent=agent,
        error_code=code,
        stage=stage,
        reason=reason,
        tool=tool,
        node=node,
        incident_id=incident,
        retryable=bool(retryable),
        message=message,
        operator_action=action,
        evidence=json.loads(evidence) if evidence else {},
    )


class SQLiteFailureStore(FailureStore):
    """The failure store in the SQLite file of the tasks (``SQLiteDatabase``)."""

    def __init__(self, database: SQLiteDatabase, retention: FailureRetention | None = None) -> None:
        super().__init__(retention)
        self.database = database

    async def add(self, failure: StoredFailure) -> None:
        """Insert ``failure``; returns once the writer's batch holding it is committed."""
        await self.database.write((_INSERT, _params(failure)))

    async def get(self, failure_id: int) -> StoredFailure | None:
        """The row with this ``id`` (one indexed read), or ``None``."""
        if not valid_failure_id(failure_id):
            return None
        params = {"id": failure_id}
        found = await self.database.read(lambda c: c.execute(_SELECT_ONE, params).fetchone())
        return None if found is None else _row(found)

    async def query(self, query: FailureQuery | None = None) -> FailurePage:
        """The matching failures, newest first (one page)."""
        query = query or FailureQuery()
        sql, params = _select(query)
        rows = await self.database.read(lambda c: c.execute(sql, params).fetchall())
        return page_of([_row(row) for row in rows], query.limit)

    async def group_by(
        self, field: GroupField | str, query: FailureQuery | None = None
    ) -> list[FailureCount]:
        """Counts by ``field``, largest first."""
        sql, params = _group(field, query or FailureQuery())
        rows = await self.database.read(lambda c: c.execute(sql, params).fetchall())
        return sort_counts((value, int(count)) for value, count in rows)

    async def histogram(
        self, query: FailureQuery | None = None, *, buckets: int, now: float | None = None
    ) -> FailureHistogram:
        """Counts per errorCode and time slice, in one read."""
        query = query or FailureQuery()
        check_buckets(buckets)
        moment = time.time() if now is None else now
        oldest_sql, oldest_params = _oldest(query)

        def run(connection: sqlite3.Connection) -> tuple[float, float, list[Any]] | None:
            oldest = None
            if query.since is None:
                oldest = connection.execute(oldest_sql, oldest_params).fetchone()[0]
            span = histogram_range(query, buckets, oldest, moment)
            if span is None:
                return None
            sql, params = _slices(query, "sqlite", *span)
            return (*span, connection.execute(sql, params).fetchall())

        found = await self.database.read(run)
        if found is None:
            return empty_histogram(moment, buckets)
        start, width, rows = found
        return histogram_of(start, width, buckets, rows)

    async def prune(self, now: float | None = None) -> int:
        """Delete failures past the retention and refresh the planner's statistics, in one
        commit; returns how many rows went."""
        moment = time.time() if now is None else now
        job = sqlite_prune_job(FAILURE_TABLE, self.retention, moment)
        return await self.database.write_returning(job)


async def create_postgres_failure_table(connection: AsyncConnection) -> None:
    """Create the failure table and its indexes on PostgreSQL if missing, in the
    transaction of ``connection`` (``open_stores`` runs it with a2a's tables)."""
    from sqlalchemy import text

    for statement in _POSTGRES_SCHEMA:
        await connection.execute(text(statement))


class PostgresFailureStore(FailureStore):
    """The failure store in the PostgreSQL database of the tasks."""

    def __init__(self, engine: AsyncEngine, retention: FailureRetention | None = None) -> None:
        super().__init__(retention)
        self.engine = engine

    async def add(self, failure: StoredFailure) -> None:
        """Insert ``failure`` in a transaction of its own."""
        from sqlalchemy import text

        async with self.engine.begin() as connection:
            await connection.execute(text(_INSERT), _params(failure))

    async def _fetch(self, sql: str, params: dict[str, Any]) -> list[Sequence[Any]]:
        from sqlalchemy import text

        async with self.engine.connect() as connection:
            result = await connection.execute(text(sql), params)
            return [tuple(row) for row in result.all()]

    async def get(self, failure_id: int) -> StoredFailure | None:
        """The row with this ``id`` (one indexed read), or ``None``."""
        if not valid_failure_id(failure_id):
            return None
        rows = await self._fetch(_SELECT_ONE, {"id": failure_id})
        return _row(rows[0]) if rows else None

    async def query(self, query: FailureQuery | None = None) -> FailurePage:
        """The matching failures, newest first (one page)."""
        query = query or FailureQuery()
        rows = await self._fetch(*_select(query))
        return page_of([_row(row) for row in rows], query.limit)

    async def group_by(
        self, field: GroupField | str, query: FailureQuery | None = None
    ) -> list[FailureCount]:
        """Counts by ``field``, largest first."""
        rows = await self._fetch(*_group(field, query or FailureQuery()))
        return sort_counts((value, int(count)) for value, count in rows)

    async def histogram(
        self, query: FailureQuery | None = None, *, buckets: int, now: float | None = None
    ) -> FailureHistogram:
        """Counts per errorCode and time slice."""
        query = query or FailureQuery()
        check_buckets(buckets)
        moment = time.time() if now is None else now
        oldest = None
        if query.since is None:
            (found,) = await self._fetch(*_oldest(query))
            oldest = None if found[0] is None else float(found[0])
        span = histogram_range(query, buckets, oldest, moment)
        if span is None:
            return empty_histogram(moment, buckets)
        rows = await self._fetch(*_slices(query, "postgresql", *span))
        return histogram_of(*span, buckets, ((int(i), c, int(n)) for i, c, n in rows))

    async def prune(self, now: float | None = None) -> int:
        """Delete failures past the retention, in one transaction; returns how many."""
        from sqlalchemy import text

        removed = 0
        moment = time.time() if now is None else now
        statements = prune_statements(FAILURE_TABLE, self.retention, moment, sqlite=False)
        async with self.engine.begin() as connection:
            for sql, params in statements:
                result = await connection.execute(text(sql), params)
                removed += max(result.rowcount, 0)
        return removed
