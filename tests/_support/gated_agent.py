"""An agent for ``llamon serve`` replicas in subprocesses (``tests._support.gated_agent:agent``)
whose runs a test holds open across processes: a file is the gate.

* ``gate PATH`` streamed: ``c0``, then (once the file ``PATH`` exists) ``c1`` and ``c2``;
  sent (blocking): ``opened PATH`` once the file exists. A gate never opened works until
  the run is cancelled or the process is killed.
* ``birthday``: input-required (a question); the answer completes the task with
  ``Thanks! Your birthday is ANSWER.``; an answer ``gate PATH`` does so once the file
  ``PATH`` exists (a resumed run held open).
* anything else: ``answered TEXT`` at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from llamon_agent.a2a.agent import AgentContext, AgentOutput, Chunk, FinalOutput
from llamon_agent.core.hitl import HITLInterrupt

__all__ = ["GATE_POLL", "GatedAgent", "agent"]

GATE_POLL = 0.02
"""Seconds between looks for the gate file."""


async def _opened(gate: Path) -> None:
    """Return once ``gate`` exists: another process makes it, so there is no event to wait
    on; a look is one ``stat``."""
    while not gate.exists():  # noqa: ASYNC110, ASYNC240 - see the docstring
        await asyncio.sleep(GATE_POLL)


def _gate(text: str) -> Path | None:
    command, _, rest = text.strip().partition(" ")
    return Path(rest) if command == "gate" and rest else None


class GatedAgent:
    """See the module docstring."""

    async def invoke(self, ctx: AgentContext) -> AgentOutput:
        if ctx.resumed:
            held = _gate(ctx.text)
            if held is not None:
                await _opened(held)
            return f"Thanks! Your birthday is {ctx.text.strip()}."
        if ctx.text.strip() == "birthday":
            return HITLInterrupt(payload={"question": "When is your birthday? (YYYY-MM-DD)"})
        gate = _gate(ctx.text)
        if gate is not None:
            await _opened(gate)
            return f"opened {gate}"
        return f"answered {ctx.text.strip()}"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[Chunk | FinalOutput]:
        gate = _gate(ctx.text)
        if gate is None or ctx.resumed:
            yield FinalOutput(await self.invoke(ctx))
            return
        yield "c0 "
        await _opened(gate)
        yield "c1 "
        yield "c2 "


agent = GatedAgent()
