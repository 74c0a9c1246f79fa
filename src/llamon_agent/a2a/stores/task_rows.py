"""A task as one database row, and back: what llamon's SQLite and PostgreSQL stores share.

What the caller sees:

* ``task_row(task)`` is ``(id, context_id, state, worker, updated_at, body, message_id)``:
  the columns the stores index (the owning worker from ``metadata["llamon.worker"]``, the
  starting message id from ``metadata["llamon.sent"]``) and the whole task serialised once
  (``model_dump_json``). ``task_from_body(body)`` reads the body back.
* ``task_from_a2a_row(row)`` reads a row of a2a-sdk's own ``tasks`` table (``id,
  context_id, kind, status, artifacts, history, metadata``, JSON as text or already
  decoded); ``None`` when it is not a valid task (it is left where it was).
* ``NewerSchemaError`` (a ``ValueError``): the database was written by a newer llamon;
  both stores refuse to open it rather than guess at its tables.
"""

from __future__ import annotations

import json
import time
from typing import Any, Final

from a2a.types import Task
from pydantic import ValidationError

from llamon_agent.a2a.stores.sent_lookup import sent_message_id
from llamon_agent.a2a.stores.workers import WORKER_METADATA_KEY

__all__ = [
    "A2A_TASK_COLUMNS",
    "NewerSchemaError",
    "TaskRow",
    "task_from_a2a_row",
    "task_from_body",
    "task_row",
]


class NewerSchemaError(ValueError):
    """The database was written by a newer llamon (its schema version is higher than this
    one reads): upgrade llamon-agent, or point it at another database."""


TaskRow = tuple[str, str, str, str | None, float, str, str | None]
"""``(id, context_id, state, worker, updated_at, body, message_id)``."""

A2A_TASK_COLUMNS: Final = "id, context_id, kind, status, artifacts, history, metadata"
"""The columns of a2a-sdk's ``tasks`` table that ``task_from_a2a_row`` reads, in order."""


def task_row(task: Task) -> TaskRow:
    """``task`` as the row llamon's stores write (one ``model_dump_json``)."""
    worker = (task.metadata or {}).get(WORKER_METADATA_KEY)
    return (
        task.id,
        task.context_id,
        task.status.state.value,
        worker if isinstance(worker, str) else None,
        time.time(),
        task.model_dump_json(),
        sent_message_id(task),
    )


def task_from_body(body: str | bytes) -> Task:
    """The task stored as ``body`` (the JSON ``task_row`` wrote)."""
    return Task.model_validate_json(body)


def task_from_a2a_row(row: tuple[Any, ...] | Any) -> Task | None:
    """The task in a row of a2a-sdk's ``tasks`` table (``A2A_TASK_COLUMNS``), or ``None``."""
    task_id, context_id, kind, status, artifacts, history, metadata = tuple(row)

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
