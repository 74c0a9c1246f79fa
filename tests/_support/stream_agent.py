"""An agent for ``llamon serve`` in a subprocess (``tests._support.stream_agent:agent``):
``go`` streams two chunks, then works until the process stops; anything else is answered
at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from llamon_agent.a2a.agent import AgentContext


class TwoChunksThenHang:
    async def invoke(self, ctx: AgentContext) -> str:
        return f"answered {ctx.text}"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
        if ctx.text != "go":
            yield f"answered {ctx.text}"
            return
        yield "c0 "
        yield "c1 "
        await asyncio.Event().wait()  # works until the process stops


agent = TwoChunksThenHang()
