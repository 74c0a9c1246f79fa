"""An agent for ``llamon serve`` in a subprocess (``tests._support.hanging_agent:agent``):
``hang`` works until the process stops (a task left ``working``); anything else is
answered at once with ``answered <text>``."""

from __future__ import annotations

import asyncio

from llamon_agent.a2a.agent import AgentContext

__all__ = ["HangOnHang", "agent"]


class HangOnHang:
    async def invoke(self, ctx: AgentContext) -> str:
        if ctx.text == "hang":
            await asyncio.Event().wait()  # works until the process stops
        return f"answered {ctx.text}"


agent = HangOnHang()
