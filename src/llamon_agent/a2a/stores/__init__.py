"""Where an agent's A2A tasks and push-notification configs live.

``open_stores()`` (``open``) picks the kind: the embedded SQLite file (``sqlite``,
``sqlite_db``), this process's memory (``memory``) or PostgreSQL. ``guard`` turns a store
outage into a retriable answer and keeps refused terminal states; ``failures`` keeps every
failed task's failure, queryable (``failures_sql`` on the databases); ``context_lookup``
finds a context's owner; ``task_events`` keeps every served task's runner events
(``task_events_sql`` on the databases; ``retention`` bounds both kept tables); ``workers``
names this worker and the states a crash leaves behind.
"""

from __future__ import annotations

from llamon_agent.a2a.stores.failures import (
    FailureCount,
    FailurePage,
    FailureQuery,
    FailureStore,
    StoredFailure,
)
from llamon_agent.a2a.stores.open import (
    DATABASE_URL_ENV,
    HOME_ENV,
    SQLITE_BUSY_TIMEOUT_MS,
    SQLITE_FILENAME,
    WORKER_ID_ENV,
    WORKER_METADATA_KEY,
    EventRetention,
    FailureRetention,
    MemoryLimits,
    StoreKind,
    Stores,
    llamon_home,
    memory_stores,
    normalize_postgres_dsn,
    open_stores,
    reconcile_orphaned_tasks,
    worker_id,
)
from llamon_agent.a2a.stores.task_events import TaskEventStore

__all__ = [
    "DATABASE_URL_ENV",
    "HOME_ENV",
    "SQLITE_BUSY_TIMEOUT_MS",
    "SQLITE_FILENAME",
    "WORKER_ID_ENV",
    "WORKER_METADATA_KEY",
    "EventRetention",
    "FailureCount",
    "FailurePage",
    "FailureQuery",
    "FailureRetention",
    "FailureStore",
    "MemoryLimits",
    "StoreKind",
    "StoredFailure",
    "Stores",
    "TaskEventStore",
    "llamon_home",
    "memory_stores",
    "normalize_postgres_dsn",
    "open_stores",
    "reconcile_orphaned_tasks",
    "worker_id",
]
