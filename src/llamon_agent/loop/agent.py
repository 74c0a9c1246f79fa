"""The older home of ``LoopAgent``, kept so imports written against it still work.

``LoopAgent`` and ``TOOL_RESULTS_ARTIFACT`` are the A2A adapter of the loop and live in
``llamon_agent.a2a.loop_agent``; ``outcome_error`` lives in ``llamon_agent.loop.outcome``.
Importing this module loads no A2A code: ``LoopAgent`` loads it on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llamon_agent.loop.outcome import outcome_error

if TYPE_CHECKING:
    from llamon_agent.a2a.loop_agent import TOOL_RESULTS_ARTIFACT, LoopAgent

__all__ = ["TOOL_RESULTS_ARTIFACT", "LoopAgent", "outcome_error"]

_A2A_NAMES = frozenset({"TOOL_RESULTS_ARTIFACT", "LoopAgent"})


def __getattr__(name: str) -> Any:
    """``LoopAgent`` and ``TOOL_RESULTS_ARTIFACT`` from the A2A layer, loaded on first use
    (through ``llamon_agent.loop``, the one place that reaches up for them)."""
    if name in _A2A_NAMES:
        from llamon_agent import loop

        return getattr(loop, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
