"""How long and how many rows a kept table holds: the one retention rule of the stores.

What the caller sees:

* ``Retention(max_age, max_rows)`` bounds a table by age (seconds) and by row count
  (``None``: no bound of that kind); ``ValueError`` for an age or a count that is not
  positive. ``FailureRetention`` (failure records: 30 days, 100 000 rows,
  ``LLAMON_FAILURES_*``) and ``EventRetention`` (runner events: 7 days, 1 000 000 rows,
  ``LLAMON_EVENTS_*``) are the same rule with their own defaults and variables;
  ``from_settings()`` reads them.
* ``prune_statements(table, retention, now, sqlite=...)`` are the deletes that apply it to
  a table with an integer ``id`` that follows the writes and a ``time`` column (epoch
  seconds): rows older than ``max_age``, then the oldest past ``max_rows``. Stores run them
  when they open and every ``PRUNE_EVERY`` writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Self

from llamon_agent.core.settings import (
    events_max_age_setting,
    events_max_rows_setting,
    failures_max_age_setting,
    failures_max_rows_setting,
)

__all__ = [
    "DEFAULT_EVENT_MAX_AGE",
    "DEFAULT_EVENT_MAX_ROWS",
    "DEFAULT_FAILURE_MAX_AGE",
    "DEFAULT_FAILURE_MAX_ROWS",
    "PRUNE_EVERY",
    "EventRetention",
    "FailureRetention",
    "Retention",
    "prune_statements",
    "sqlite_prune_job",
]

DEFAULT_FAILURE_MAX_AGE: Final = 30 * 24 * 3600.0
"""Seconds a failure is kept by default (30 days)."""
DEFAULT_FAILURE_MAX_ROWS: Final = 100_000
"""Failures kept by default; the oldest go first."""
DEFAULT_EVENT_MAX_AGE: Final = 7 * 24 * 3600.0
"""Seconds a task's runner events are kept by default (7 days)."""
DEFAULT_EVENT_MAX_ROWS: Final = 1_000_000
"""Runner events kept by default; the oldest go first."""
PRUNE_EVERY: Final = 500
"""Writes between two prunings of old and surplus rows."""


_Readers = tuple[Callable[[], float | None], Callable[[], int | None]]


@dataclass(frozen=True, slots=True)
class Retention:
    """How long and how many rows are kept (``None``: no bound of that kind).

    Raises ``ValueError`` for an age or a count that is not positive.
    """

    max_age: float | None
    max_rows: int | None

    _settings: ClassVar[_Readers | None] = None
    """A kind's two environment readers (age, rows), for ``from_settings``."""

    def __post_init__(self) -> None:
        if self.max_age is not None and not 0 < self.max_age < float("inf"):
            raise ValueError(f"max_age must be a number of seconds > 0, got {self.max_age!r}")
        if self.max_rows is not None and self.max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {self.max_rows!r}")

    @classmethod
    def from_settings(cls) -> Self:
        """A kind's defaults, overridden by its two variables (``LLAMON_FAILURES_*``,
        ``LLAMON_EVENTS_*``); ``ValueError`` naming a variable with a bad value."""
        if cls._settings is None:
            raise TypeError(f"{cls.__name__} has no settings of its own")
        read_age, read_rows = cls._settings
        defaults = cls()  # type: ignore[call-arg]  # a kind's fields all have defaults
        age, rows = read_age(), read_rows()
        return cls(
            max_age=defaults.max_age if age is None else age,
            max_rows=defaults.max_rows if rows is None else rows,
        )


@dataclass(frozen=True, slots=True)
class FailureRetention(Retention):
    """The failure store's retention: 30 days and 100 000 rows unless told otherwise
    (``from_settings``: ``LLAMON_FAILURES_MAX_AGE`` / ``_MAX_ROWS``)."""

    max_age: float | None = DEFAULT_FAILURE_MAX_AGE
    max_rows: int | None = DEFAULT_FAILURE_MAX_ROWS

    _settings: ClassVar[_Readers | None] = (failures_max_age_setting, failures_max_rows_setting)


@dataclass(frozen=True, slots=True)
class EventRetention(Retention):
    """The task event store's retention: 7 days and 1 000 000 events unless told otherwise
    (``from_settings``: ``LLAMON_EVENTS_MAX_AGE`` / ``_MAX_ROWS``)."""

    max_age: float | None = DEFAULT_EVENT_MAX_AGE
    max_rows: int | None = DEFAULT_EVENT_MAX_ROWS

    _settings: ClassVar[_Readers | None] = (events_max_age_setting, events_max_rows_setting)


def prune_statements(
    table: str, retention: Retention, now: float, *, sqlite: bool
) -> list[tuple[str, dict[str, Any]]]:
    """The deletes of ``table``'s rows older than ``retention.max_age`` (before ``now``),
    then of the oldest rows past ``max_rows``.

    On SQLite (one writer: ids follow the writes, and rows only ever leave from the old
    end) the newest ``keep`` rows are the ids above ``max(id) - keep``: two index lookups,
    where counting would read the whole table on the writer thread. On PostgreSQL the
    newest ``keep`` by time stay.
    """
    statements: list[tuple[str, dict[str, Any]]] = []
    if retention.max_age is not None:
        old = f"DELETE FROM {table} WHERE time < :oldest"  # noqa: S608 - our constants
        statements.append((old, {"oldest": now - retention.max_age}))
    if retention.max_rows is not None:
        if sqlite:
            surplus = f"DELETE FROM {table} WHERE id <= (SELECT MAX(id) FROM {table}) - :keep"  # noqa: S608
        else:
            surplus = (
                f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table}"  # noqa: S608
                " ORDER BY time DESC, id DESC OFFSET :keep)"
            )
        statements.append((surplus, {"keep": retention.max_rows}))
    return statements


_ANALYSIS_LIMIT: Final = 1000
"""Rows ``ANALYZE`` samples per index after a prune (about a millisecond)."""


def sqlite_prune_job(
    table: str, retention: Retention, now: float
) -> Callable[[sqlite3.Connection], int]:
    """The SQLite writer's job that applies ``retention`` to ``table`` (``prune_statements``)
    and refreshes the planner's statistics, in one commit; it returns how many rows went.
    Fresh statistics let the planner pick the time index for a short range and a column's
    index for a long one."""
    statements = prune_statements(table, retention, now, sqlite=True)

    def run(connection: sqlite3.Connection) -> int:
        removed = sum(connection.execute(sql, params).rowcount for sql, params in statements)
        connection.execute(f"PRAGMA analysis_limit = {_ANALYSIS_LIMIT}")
        connection.execute(f"ANALYZE {table}")
        return removed

    return run
