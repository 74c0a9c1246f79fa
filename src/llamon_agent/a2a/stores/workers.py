"""Which process owns a task: the worker identity stamped on every task it creates.

What the caller sees: ``worker_id()`` is ``$LLAMON_WORKER_ID`` when set, else an opaque id
of this host, ``w-`` and 16 hex digits (``w-3f9a0c1e5b7d2468``). The executor writes it
into each new task's ``metadata["llamon.worker"]`` (``WORKER_METADATA_KEY``), where any
caller of ``tasks/get`` can read it -- so it names no host and no process: the default id
is a keyed hash of the hostname (keyed with the machine id, ``/etc/machine-id``, when the
host has one), the same after every restart on the same host, different on another host.
Reconciliation at startup ends only the unfinished tasks stamped with this process's id
(or not stamped at all). A ``LLAMON_WORKER_ID`` you set is stamped as you wrote it: pick
a name that tells a caller nothing (not a hostname).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import socket
from pathlib import Path
from typing import Final

from llamon_agent.a2a.states import ORPHAN_STATES
from llamon_agent.core.settings import WORKER_ID_ENV, worker_id_setting

__all__ = ["ORPHAN_STATES", "WORKER_ID_ENV", "WORKER_METADATA_KEY", "worker_id"]

WORKER_METADATA_KEY: Final = "llamon.worker"
"""Task metadata key holding the ``worker_id()`` of the process that created the task."""


_MACHINE_ID_FILES: Final = ("/etc/machine-id", "/var/lib/dbus/machine-id")
_DEFAULT_KEY: Final = b"llamon-agent worker id"


def _machine_key() -> bytes:
    """The host's machine id (a random per-install secret), or a fixed key without one."""
    for name in _MACHINE_ID_FILES:
        try:
            text = Path(name).read_text(encoding="ascii", errors="ignore").strip()
        except OSError:
            continue
        if text:
            return text.encode("ascii")
    return _DEFAULT_KEY


@functools.cache
def _host_worker_id(hostname: str) -> str:
    message = b"llamon-agent worker\x00" + hostname.encode("utf-8", "surrogatepass")
    return "w-" + hmac.new(_machine_key(), message, hashlib.sha256).hexdigest()[:16]


def worker_id() -> str:
    """This process's worker identity: ``$LLAMON_WORKER_ID``, else this host's opaque id.

    The default is stable across restarts on one host (reconciliation after a crash finds
    the tasks the previous process stamped) and reveals neither the hostname nor the pid.
    Several server processes on one host must each set ``LLAMON_WORKER_ID``, or one
    process's reconciliation would end the tasks the others are still running.
    """
    return worker_id_setting() or _host_worker_id(socket.gethostname())
