"""Which process owns a task: the worker identity stamped on every task it creates.

What the caller sees: ``worker_id()`` is ``$LLAMON_WORKER_ID`` or the hostname, and the
executor writes it into each new task's ``metadata["llamon.worker"]``
(``WORKER_METADATA_KEY``). Reconciliation at startup ends only the unfinished tasks
stamped with this process's id (or not stamped at all).
"""

from __future__ import annotations

import os
import socket
from typing import Final

__all__ = ["ORPHAN_STATES", "WORKER_ID_ENV", "WORKER_METADATA_KEY", "worker_id"]

WORKER_ID_ENV: Final = "LLAMON_WORKER_ID"
"""This process's worker identity; default the hostname."""

WORKER_METADATA_KEY: Final = "llamon.worker"
"""Task metadata key holding the ``worker_id()`` of the process that created the task."""

ORPHAN_STATES: Final = ("submitted", "working")
"""Task states a stopped worker leaves behind (``input-required`` waits for the caller)."""


def worker_id() -> str:
    """This process's worker identity: ``$LLAMON_WORKER_ID`` or the hostname.

    Several server processes on one host must each set ``LLAMON_WORKER_ID``, or one
    process's reconciliation would end the tasks the others are still running.
    """
    return os.environ.get(WORKER_ID_ENV, "").strip() or socket.gethostname()
