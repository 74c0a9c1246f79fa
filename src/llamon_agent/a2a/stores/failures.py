"""The failure store: every failed task's ``FailureRecord``, kept next to the tasks.

What the caller sees:

* ``stores.failures`` (from ``open_stores``) is a ``FailureStore`` in the same database as
  the tasks: the ``llamon_failures`` table of the SQLite file or of PostgreSQL, or a
  bounded list in memory. A served agent hands it a ``StoredFailure`` each time a task ends
  ``failed``: task id, context id, agent (the card's name), time, errorCode, stage, reason,
  tool, flow node, incident id, retryable, the scrubbed message, the operator action and
  the record's evidence (already scrubbed; the cause chain across agents under ``cause``).
* ``record(failure)`` never waits and never raises: in memory the row is kept at once; in
  a database it is written in the background (on SQLite in the writer's next batched
  commit). A write that fails is logged as a warning and counted in ``dropped``; the
  task's answer is never held up or changed.
  ``await flush()`` waits for the writes handed over so far.
* ``await get(failure_id)`` gives the one failure with that ``id`` (the row number
  ``llamon failures`` shows), or ``None`` when no row has it (never stored, or pruned).
* ``await query(FailureQuery(...))`` gives a ``FailurePage``: the newest failures first,
  filtered by time range, errorCode, stage, reason, tool, agent, node or task, at most
  ``limit`` rows, and ``next_cursor`` for the page after. ``await group_by("reason", q)``
  counts the failures matching ``q`` by one column, largest count first.
  ``await histogram(q, buckets=24)`` counts them per errorCode in ``buckets`` equal time
  slices of ``q``'s range (a chart's bars).
* Retention: ``FailureRetention(max_age=30 days, max_rows=100 000)`` by default, or
  ``LLAMON_FAILURES_MAX_AGE`` (seconds) / ``LLAMON_FAILURES_MAX_ROWS``; older and surplus
  rows are pruned when the store opens and every ``PRUNE_EVERY`` writes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import time
from abc import ABC, abstractmethod
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, get_args

from llamon_agent.a2a.stores.retention import (
    DEFAULT_FAILURE_MAX_AGE,
    DEFAULT_FAILURE_MAX_ROWS,
    PRUNE_EVERY,
    FailureRetention,
)
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.failures import FailureRecord

__all__ = [
    "DEFAULT_FAILURE_MAX_AGE",
    "DEFAULT_FAILURE_MAX_ROWS",
    "GROUP_FIELDS",
    "MAX_FAILURE_ID",
    "PRUNE_EVERY",
    "FailureCount",
    "FailureHistogram",
    "FailurePage",
    "FailureQuery",
    "FailureRetention",
    "FailureStore",
    "GroupField",
    "MemoryFailureStore",
    "StoredFailure",
]

logger = logging.getLogger(__name__)

MAX_LIMIT: Final = 1_000
"""The most rows one ``query`` returns."""
_MAX_PENDING: Final = 10_000
MAX_FAILURE_ID: Final = 2**63 - 1
"""The largest row number a store hands out (a 64-bit signed integer on every database)."""

GroupField = Literal["reason", "error_code", "stage", "tool", "agent", "node"]
GROUP_FIELDS: Final[tuple[str, ...]] = get_args(GroupField)
"""The columns ``group_by`` counts by."""


@dataclass(frozen=True, slots=True)
class StoredFailure:
    """One failed task's failure as the store keeps it; every text already scrubbed.

    ``time`` is when the failure was recorded (UTC); ``node`` the flow node that failed;
    ``evidence`` the record's evidence (its ``cause`` is the failure's path across agents).
    ``id`` is the store's row number (``None`` before it is stored).
    """

    task_id: str
    time: datetime
    error_code: str
    stage: str
    reason: str
    message: str
    operator_action: str
    retryable: bool
    context_id: str | None = None
    agent: str | None = None
    tool: str | None = None
    node: str | None = None
    incident_id: str | None = None
    evidence: Mapping[str, object] = field(default_factory=dict)
    id: int | None = None

    @classmethod
    def of(
        cls,
        record: FailureRecord,
        *,
        task_id: str,
        context_id: str | None = None,
        agent: str | None = None,
        node: str | None = None,
    ) -> StoredFailure:
        """The row for ``record`` (already scrubbed) of the task ``task_id``."""
        evidence = dict(record.evidence)
        incident = evidence.get("incident_id")
        tool = record.tool or evidence.get("tool")
        return cls(
            task_id=task_id,
            time=record.time.astimezone(UTC),
            error_code=record.error_code.value,
            stage=record.stage,
            reason=record.reason,
            message=record.message,
            operator_action=record.operator_action,
            retryable=record.retryable,
            context_id=context_id,
            agent=agent,
            tool=tool if isinstance(tool, str) else None,
            node=node or record.step_id,
            incident_id=incident if isinstance(incident, str) else None,
            evidence=evidence,
        )

    @property
    def timestamp(self) -> float:
        """``time`` as seconds since the epoch."""
        return self.time.timestamp()

    def to_dict(self) -> dict[str, object]:
        """The JSON-ready row, with the wire's names (``errorCode``, ``taskId`` ...);
        ``id`` first, once the row is stored (absent before)."""
        stored: dict[str, object] = {} if self.id is None else {"id": self.id}
        return {
            **stored,
            "time": self.time.isoformat(),
            "taskId": self.task_id,
            "contextId": self.context_id,
            "agent": self.agent,
            "errorCode": self.error_code,
            "stage": self.stage,
            "reason": self.reason,
            "tool": self.tool,
            "node": self.node,
            "incidentId": self.incident_id,
            "retryable": self.retryable,
            "message": self.message,
            "operatorAction": self.operator_action,
            "evidence": dict(self.evidence),
        }


@dataclass(frozen=True, slots=True)
class FailureQuery:
    """Which failures to return: every given field must match (``None``: any).

    ``since``/``until`` bound ``time`` (``since`` included, ``until`` excluded; naive
    datetimes are read as UTC); ``code`` is an errorCode (``ErrorCode`` or its name);
    ``limit`` is 1 to ``MAX_LIMIT``; ``cursor`` is a ``FailurePage.next_cursor``. Raises
    ``ValueError`` naming the field for an unknown errorCode, a bad limit or cursor.
    """

    since: datetime | None = None
    until: datetime | None = None
    code: ErrorCode | str | None = None
    stage: str | None = None
    reason: str | None = None
    tool: str | None = None
    agent: str | None = None
    node: str | None = None
    task_id: str | None = None
    limit: int = 100
    cursor: str | None = None

    def __post_init__(self) -> None:
        if self.code is not None:
            try:
                object.__setattr__(self, "code", ErrorCode(str(self.code).upper()))
            except ValueError:
                known = ", ".join(code.value for code in ErrorCode)
                problem = f"code: unknown errorCode {self.code!r}; use one of {known}"
                raise ValueError(problem) from None
        if not 1 <= self.limit <= MAX_LIMIT:
            raise ValueError(f"limit must be 1 to {MAX_LIMIT}, got {self.limit!r}")
        if self.cursor is not None:
            decode_cursor(self.cursor)

    def equals(self) -> dict[str, str]:
        """The column -> value filters given (errorCode by its value)."""
        pairs = {
            "error_code": self.code.value if isinstance(self.code, ErrorCode) else None,
            "stage": self.stage,
            "reason": self.reason,
            "tool": self.tool,
            "agent": self.agent,
            "node": self.node,
            "task_id": self.task_id,
        }
        return {column: value for column, value in pairs.items() if value is not None}

    def time_range(self) -> tuple[float | None, float | None]:
        """``since`` and ``until`` as epoch seconds."""
        return _epoch(self.since), _epoch(self.until)


def _epoch(moment: datetime | None) -> float | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def encode_cursor(failure: StoredFailure) -> str:
    """The cursor of the page after ``failure`` (opaque to callers)."""
    raw = f"{failure.timestamp!r}:{failure.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, int]:
    """``(time, id)`` of a cursor; ``ValueError`` naming ``cursor`` if it is not one."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        moment, _, row = base64.urlsafe_b64decode(padded).decode().partition(":")
        return float(moment), int(row)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValueError(f"cursor: {cursor!r} is not a cursor this store returned") from None


@dataclass(frozen=True, slots=True)
class FailurePage:
    """One page of failures, newest first; ``next_cursor`` is ``None`` on the last page."""

    rows: list[StoredFailure]
    next_cursor: str | None = None


@dataclass(frozen=True, slots=True)
class FailureCount:
    """How many failures have ``value`` in the grouped column (``None``: no value)."""

    value: str | None
    count: int


MAX_BUCKETS: Final = 1_000
"""The most time slices one ``histogram`` counts in."""


@dataclass(frozen=True, slots=True)
class FailureHistogram:
    """Failures counted per errorCode in equal time slices.

    Slice ``i`` covers ``[start + i * width, start + (i + 1) * width)`` (``width`` in
    seconds); ``counts[i]`` maps each errorCode seen in it to its count (codes with no
    failure there are absent).
    """

    start: datetime
    width: float
    counts: list[dict[str, int]]

    @property
    def end(self) -> datetime:
        """Where the last slice ends."""
        return self.start + timedelta(seconds=self.width * len(self.counts))

    @property
    def total(self) -> int:
        """Every failure counted."""
        return sum(sum(bucket.values()) for bucket in self.counts)

    def codes(self) -> list[str]:
        """The errorCodes counted, most failures first, then by name."""
        totals: Counter[str] = Counter()
        for bucket in self.counts:
            totals.update(bucket)
        return [code for code, _ in sorted(totals.items(), key=lambda pair: (-pair[1], pair[0]))]


def histogram_range(
    query: FailureQuery, buckets: int, oldest: float | None, now: float
) -> tuple[float, float] | None:
    """``(start, width)`` of the slices for ``query``: from ``since`` (else ``oldest``, the
    oldest matching failure's time) to ``until`` (else ``now``); ``None`` when nothing
    matches and no ``since`` is given. ``ValueError`` for ``buckets`` outside 1 to
    ``MAX_BUCKETS``."""
    check_buckets(buckets)
    since, until = query.time_range()
    start = since if since is not None else oldest
    if start is None:
        return None
    end = until if until is not None else now
    if end <= start:
        end = start + 1.0
    return start, (end - start) / buckets


def check_buckets(buckets: int) -> None:
    """``ValueError`` naming ``buckets`` unless it is 1 to ``MAX_BUCKETS``."""
    if not isinstance(buckets, int) or not 1 <= buckets <= MAX_BUCKETS:
        raise ValueError(f"buckets must be 1 to {MAX_BUCKETS}, got {buckets!r}")


def histogram_of(
    start: float, width: float, buckets: int, rows: Iterable[tuple[int, str, int]]
) -> FailureHistogram:
    """The histogram from ``(slice, errorCode, count)`` rows (a slice past the end, from
    rounding at the edge, counts in the last one)."""
    counts: list[dict[str, int]] = [{} for _ in range(buckets)]
    for index, code, count in rows:
        bucket = counts[min(max(int(index), 0), buckets - 1)]
        bucket[code] = bucket.get(code, 0) + int(count)
    return FailureHistogram(datetime.fromtimestamp(start, UTC), width, counts)


def page_of(rows: list[StoredFailure], limit: int) -> FailurePage:
    """The page for ``rows`` fetched with ``limit + 1`` (the extra row says more exist)."""
    if len(rows) > limit:
        rows = rows[:limit]
        return FailurePage(rows, encode_cursor(rows[-1]))
    return FailurePage(rows)


def empty_histogram(now: float, buckets: int) -> FailureHistogram:
    """What ``histogram`` answers when nothing matches and no ``since`` is given:
    ``buckets`` empty slices over the hour before ``now``."""
    start = datetime.fromtimestamp(now - 3600.0, UTC)
    return FailureHistogram(start, 3600.0 / buckets, [{} for _ in range(buckets)])


def check_group_field(name: str) -> GroupField:
    """``name`` if ``group_by`` counts by it; else ``ValueError`` naming the choices."""
    if name not in GROUP_FIELDS:
        raise ValueError(f"group by {name!r}: use one of {', '.join(GROUP_FIELDS)}")
    return name  # type: ignore[return-value]


class FailureStore(ABC):
    """Where failed tasks' failures are kept; see the module docstring.

    Subclasses implement ``add``, ``get``, ``query``, ``group_by``, ``histogram`` and
    ``prune``; ``record``, ``flush`` and ``close`` are shared.
    """

    def __init__(self, retention: FailureRetention | None = None) -> None:
        self.retention = retention if retention is not None else FailureRetention()
        self.dropped = 0
        """Failures not stored (the write failed, or too many were waiting)."""
        self._pending: set[asyncio.Task[None]] = set()
        self._since_prune = 0

    def record(self, failure: StoredFailure) -> None:
        """Store ``failure`` in the background; never waits, never raises."""
        if len(self._pending) >= _MAX_PENDING:
            self._drop(failure, "too many writes waiting")
            return
        try:
            task = asyncio.get_running_loop().create_task(self._write(failure))
        except RuntimeError:
            self._drop(failure, "no event loop")
            return
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    def _drop(self, failure: StoredFailure, why: str) -> None:
        self.dropped += 1
        logger.warning("failure of task %s not stored: %s", failure.task_id, why)

    async def _write(self, failure: StoredFailure) -> None:
        try:
            await self.add(failure)
            self._since_prune += 1
            if self._since_prune >= PRUNE_EVERY:
                self._since_prune = 0
                await self.prune()
        except Exception as exc:
            self._drop(failure, type(exc).__name__)

    async def flush(self) -> None:
        """Wait for every failure handed to ``record`` so far to be stored (or dropped)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def close(self) -> None:
        """Finish the writes in flight (the database itself is closed by its owner)."""
        await self.flush()

    @abstractmethod
    async def add(self, failure: StoredFailure) -> None:
        """Store ``failure`` now; raises what the database raises."""

    @abstractmethod
    async def get(self, failure_id: int) -> StoredFailure | None:
        """The failure whose ``id`` is ``failure_id``; ``None`` when no row has it (an id
        below 1 or above ``MAX_FAILURE_ID`` never does)."""

    @abstractmethod
    async def query(self, query: FailureQuery | None = None) -> FailurePage:
        """The failures matching ``query``, newest first (one page)."""

    @abstractmethod
    async def group_by(
        self, field: GroupField | str, query: FailureQuery | None = None
    ) -> list[FailureCount]:
        """Counts of the failures matching ``query`` (its ``limit``/``cursor`` ignored) by
        ``field``, largest first, then by value. ``ValueError`` for an unknown field."""

    @abstractmethod
    async def histogram(
        self, query: FailureQuery | None = None, *, buckets: int, now: float | None = None
    ) -> FailureHistogram:
        """The failures matching ``query`` (its ``limit``/``cursor`` ignored) counted per
        errorCode in ``buckets`` equal slices of time, from ``query.since`` (else the
        oldest match) to ``query.until`` (else ``now``, default the current time). Nothing
        matching and no ``since``: empty slices over the hour before now. ``ValueError`` for
        ``buckets`` outside 1 to ``MAX_BUCKETS``."""

    @abstractmethod
    async def prune(self, now: float | None = None) -> int:
        """Delete failures past the retention (``now``: epoch seconds); returns how many."""


class MemoryFailureStore(FailureStore):
    """Failures in this process: at most ``retention.max_rows``, none older than
    ``retention.max_age`` (lost on exit). ``clock`` gives epoch seconds."""

    def __init__(
        self,
        retention: FailureRetention | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(retention)
        self._rows: deque[StoredFailure] = deque(maxlen=self.retention.max_rows)
        self._clock = clock
        self._next_id = 1

    def record(self, failure: StoredFailure) -> None:
        """Store ``failure`` at once: an append waits for nothing, so no background write
        is made for it. Never raises (a row not stored is logged and counted in
        ``dropped``)."""
        try:
            self._append(failure)
        except Exception as exc:
            self._drop(failure, type(exc).__name__)

    async def add(self, failure: StoredFailure) -> None:
        """Append ``failure`` (the oldest row goes when the list is full, and rows past
        ``max_age`` go at once)."""
        self._append(failure)

    def _append(self, failure: StoredFailure) -> None:
        stored = _with_id(failure, self._next_id)
        self._next_id += 1
        self._rows.append(stored)
        self._prune_now(self._clock())

    async def get(self, failure_id: int) -> StoredFailure | None:
        """The kept row with this ``id``, or ``None``."""
        if not valid_failure_id(failure_id):
            return None
        return next((row for row in self._rows if row.id == failure_id), None)

    def _matching(self, query: FailureQuery) -> Iterable[StoredFailure]:
        equals = query.equals()
        since, until = query.time_range()
        after = decode_cursor(query.cursor) if query.cursor else None
        for row in reversed(self._rows):
            moment = row.timestamp
            if since is not None and moment < since:
                continue
            if until is not None and moment >= until:
                continue
            if after is not None and (moment, row.id or 0) >= after:
                continue
            if all(_column(row, name) == value for name, value in equals.items()):
                yield row

    async def query(self, query: FailureQuery | None = None) -> FailurePage:
        """The matching failures, newest first (one page)."""
        query = query or FailureQuery()
        rows = sorted(self._matching(query), key=_newest_first)[: query.limit + 1]
        return page_of(rows, query.limit)

    async def group_by(
        self, field: GroupField | str, query: FailureQuery | None = None
    ) -> list[FailureCount]:
        """Counts by ``field``, largest first."""
        column = check_group_field(field)
        counts = Counter(_column(row, column) for row in self._matching(query or FailureQuery()))
        return sort_counts(counts.items())

    async def histogram(
        self, query: FailureQuery | None = None, *, buckets: int, now: float | None = None
    ) -> FailureHistogram:
        """Counts per errorCode and time slice."""
        query = query or FailureQuery()
        check_buckets(buckets)
        rows = list(self._matching(query))
        moment = self._clock() if now is None else now
        oldest = min((row.timestamp for row in rows), default=None)
        span = histogram_range(query, buckets, oldest, moment)
        if span is None:
            return empty_histogram(moment, buckets)
        start, width = span
        counts = Counter((int((row.timestamp - start) // width), row.error_code) for row in rows)
        return histogram_of(start, width, buckets, ((i, c, n) for (i, c), n in counts.items()))

    async def prune(self, now: float | None = None) -> int:
        """Drop rows older than ``max_age``, then the oldest past ``max_rows``."""
        return self._prune_now(self._clock() if now is None else now)

    def _prune_now(self, now: float) -> int:
        removed = 0
        if self.retention.max_age is not None:
            oldest = now - self.retention.max_age
            while self._rows and self._rows[0].timestamp < oldest:
                self._rows.popleft()
                removed += 1
        if self.retention.max_rows is not None:
            while len(self._rows) > self.retention.max_rows:
                self._rows.popleft()
                removed += 1
        return removed


def valid_failure_id(failure_id: int) -> bool:
    """Whether ``failure_id`` can be a stored row's ``id`` (1 to ``MAX_FAILURE_ID``; a
    ``bool`` is not an id)."""
    return (
        isinstance(failure_id, int)
        and not isinstance(failure_id, bool)
        and 1 <= failure_id <= MAX_FAILURE_ID
    )


def _newest_first(row: StoredFailure) -> tuple[float, int]:
    return (-row.timestamp, -(row.id or 0))


def _with_id(failure: StoredFailure, row_id: int) -> StoredFailure:
    return replace(failure, id=row_id)


def _column(row: StoredFailure, name: str) -> Any:
    return row.error_code if name == "error_code" else getattr(row, name)


def sort_counts(pairs: Iterable[tuple[str | None, int]]) -> list[FailureCount]:
    """``FailureCount``s, largest count first, then by value (``None`` last)."""
    ordered = sorted(pairs, key=lambda pair: (-pair[1], pair[0] is None, pair[0] or ""))
    return [FailureCount(value, count) for value, count in ordered]
