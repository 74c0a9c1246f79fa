"""The demo agent: one scripted agent that shows every kind of answer llamon gives.

Send it one of these commands as text:

* ``hello``      -> completed, with an answer
* ``upstream``   -> failed: UPSTREAM_UNAVAILABLE (a component failed), retriable
* ``quota``      -> failed: RATE_LIMITED with retryAfterMs (raise_application_error)
* ``partial``    -> failed, but the artifact made before the failure is kept
* ``stream``     -> streams three chunks, then fails midway: chunks kept, one failed event
* ``birthday``   -> input-required; answer with a date to complete the task
* ``hang``       -> keeps working until cancelled (or until the server is killed)

``llamon demo`` serves it and drives every command. Serve it yourself with::

    llamon serve llamon_agent.examples.demo_agent:agent \\
        --card llamon_agent.examples.demo_agent:card
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from llamon_agent.a2a.agent import AgentContext, AgentOutput, Chunk, FinalOutput
from llamon_agent.a2a.card import build_agent_card, skill
from llamon_agent.core.errors import ErrorCode, raise_application_error
from llamon_agent.core.hitl import HITLInterrupt
from llamon_agent.exceptions import ComponentInvokeError

__all__ = ["DemoAgent", "agent", "card"]


class DemoAgent:
    """Shows llamon's answers: success, failures, partial results, streams and HITL."""

    name = "llamon-demo"

    async def invoke(self, ctx: AgentContext) -> AgentOutput:
        """Answer one command (see the module docstring)."""
        if ctx.resumed:
            return f"Thanks! Your birthday is {ctx.text.strip()}."
        command = ctx.text.strip().lower()
        if command == "upstream":
            raise ComponentInvokeError("the account service did not answer")
        if command == "quota":
            raise_application_error(
                ErrorCode.RATE_LIMITED,
                "classifier_quota_exceeded",
                message="The classifier's daily quota is used up.",
                retriable=True,
                retryAfterMs=60_000,
            )
        if command == "partial":
            await ctx.add_artifact(
                {"subject": "Ada Lovelace", "source": "registry"}, "fetch_subject"
            )
            raise ComponentInvokeError("the search index is down")
        if command == "birthday":
            return HITLInterrupt(payload={"question": "When is your birthday? (YYYY-MM-DD)"})
        if command == "hang":
            await asyncio.Event().wait()
        return f"Hello! You said: {ctx.text.strip()}"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[Chunk | FinalOutput]:
        """``stream`` streams and fails midway; any other command answers as ``invoke``."""
        if ctx.text.strip().lower() != "stream":
            yield FinalOutput(await self.invoke(ctx))
            return
        for word in ("Streaming ", "a long ", "answer "):
            yield word
        raise ComponentInvokeError("the model connection dropped mid-stream")


agent = DemoAgent()

card = build_agent_card(
    name="llamon-demo",
    description=(
        "Demonstrates llamon-agent's answers: a success, upstream and rate-limit failures, "
        "a failure that keeps partial results, a stream that fails midway, and a question "
        "back to the caller (input-required)."
    ),
    url="http://127.0.0.1:8000/",
    version="1.0.0",
    skills=[
        skill(
            "demo",
            "Demonstrate an answer",
            "Answers one demo command with the kind of result or failure it names.",
            tags=["demo"],
            examples=["hello", "upstream", "partial", "stream", "birthday"],
        )
    ],
)
