"""An agent that raises the exception its request describes (``boundary_cases.build``).

The boundary property suite serves it with ``llamon serve`` in a process of its own.
"""

from __future__ import annotations

from llamon_agent.a2a import AgentContext
from tests._support.boundary_cases import build

__all__ = ["agent"]


async def agent(ctx: AgentContext) -> str:
    """Raise what the request's data part says: ``{"carrier": ..., "text": ...}``."""
    (instruction,) = ctx.data
    raise build(str(instruction["carrier"]), str(instruction["text"]))
