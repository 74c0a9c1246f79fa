"""``ConsoleOptions``: how ``create_app(..., console=...)`` and ``llamon console`` serve the
web console."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Final

from llamon_agent.a2a.stores.task_events import TaskEventStore

__all__ = ["CONSOLE_PATH", "SESSION_SECONDS", "ConsoleOptions"]

CONSOLE_PATH: Final = "/console"
"""Where the console is served; every path under it uses the console's own sign-in."""
SESSION_SECONDS: Final = 8 * 3600.0
"""How long a console sign-in lasts."""


@dataclass(frozen=True)
class ConsoleOptions:
    """The web console at ``/console``.

    ``operators``: the named callers (``AuthConfig(principals=...)``) who may use the
    console; the caller of the positional secrets always may. The console shows every
    caller's tasks, so a caller not listed is refused even with a valid key.
    ``events``: where the task pages read each task's kept events
    (``stores.events``); ``None``: the events this process still holds, when the app has
    an event bus, else none. ``secret``: the key signing session cookies; ``None``:
    ``LLAMON_CONSOLE_SECRET``, else a random key per app (sessions end with the process).
    ``refresh_seconds``: how often the live tasks table refreshes.
    """

    operators: Collection[str] = ()
    events: TaskEventStore | None = None
    secret: bytes | None = field(default=None, repr=False)
    session_seconds: float = SESSION_SECONDS
    refresh_seconds: int = 3

    def __post_init__(self) -> None:
        if isinstance(self.operators, str):
            raise TypeError("ConsoleOptions operators must be a collection of caller names")
        if not all(isinstance(name, str) and name.strip() for name in self.operators):
            raise ValueError("ConsoleOptions operators must be non-empty caller names")
        if not 0 < self.session_seconds <= 7 * 24 * 3600:
            raise ValueError("ConsoleOptions session_seconds must be > 0 and at most a week")
        if not 1 <= self.refresh_seconds <= 3600:
            raise ValueError("ConsoleOptions refresh_seconds must be 1 to 3600")
