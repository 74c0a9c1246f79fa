"""``LoopAgent``: the tool loop served as an A2A agent (the loop's adapter, beside the flow's).

``LoopAgent(model, registry_or_view)`` meets the A2A agent protocol (``invoke(ctx)``): it
runs ``run_loop`` on the caller's text. What the A2A caller receives:

==========================  ==========================================================
outcome                     A2A answer
==========================  ==========================================================
``completed``               ``completed``, the model's answer as text
``invalid_model_response``  ``failed``, ``UPSTREAM_UNAVAILABLE`` / ``invalid_model_response``,
                            retriable
``max_rounds_exceeded``     ``failed``, ``UPSTREAM_UNAVAILABLE`` / ``max_rounds_exceeded``,
                            retriable
``model_error``             ``failed`` with the model exception's classification: its
                            code, reason, retriable, ``retryAfterMs`` when known,
                            ``retried`` (the adapter's retries of the failing call); an
                            unmapped exception shows only an incident id
``tool_escalated``          the tool's exception is re-raised as it was: ``failed`` as
                            the table classifies it (an MCP tool's third transport
                            failure: ``UPSTREAM_UNAVAILABLE``/``UPSTREAM_TIMEOUT``,
                            retriable)
==========================  ==========================================================

On every failure, the tool calls made so far are first added as an artifact named
``tool_results`` (``ToolCallResult.to_dict()`` each), so they survive the failed answer.
A ``LlamonApplicationError`` or ``GuardrailBlockedError`` raised by the model itself is
re-raised unchanged: its extras, or the guardrail's withholding of artifacts, still apply.
The exception raised is ``llamon_agent.loop.outcome_error(outcome)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from llamon_agent.a2a.agent import AgentContext, AgentOutput
from llamon_agent.loop.events import EventHandler
from llamon_agent.loop.model import ChatMessage, Model, SystemMessage, UserMessage
from llamon_agent.loop.outcome import LoopOutcome, outcome_error
from llamon_agent.loop.runner import DEFAULT_MAX_ROUNDS, run_loop
from llamon_agent.loop.tools import ToolRegistry, ToolView

__all__ = ["TOOL_RESULTS_ARTIFACT", "LoopAgent"]

TOOL_RESULTS_ARTIFACT: Final = "tool_results"
"""Name of the artifact holding the partial tool results of a failed run."""


class LoopAgent:
    """An A2A agent that answers with the tool loop (see the module docstring).

    ``tools`` is a registry (each run sees all of its tools as they are then) or a view.
    ``system_prompt`` opens every run's transcript; ``on_event`` receives the run's
    ``LoopEvent``\\s.
    """

    def __init__(
        self,
        model: Model,
        tools: ToolRegistry | ToolView,
        *,
        system_prompt: str | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        on_event: EventHandler | None = None,
        name: str = "loop-agent",
    ) -> None:
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise ValueError(f"max_rounds must be a positive integer, got {max_rounds!r}")
        self.model = model
        self.tools = tools
        self.system_prompt = system_prompt
        self.max_rounds = max_rounds
        self.on_event = on_event
        self.name = name

    def messages_for(self, ctx: AgentContext) -> list[ChatMessage]:
        """The transcript a run starts from: the system prompt, then the caller's text."""
        messages: list[ChatMessage] = []
        if self.system_prompt:
            messages.append(SystemMessage(self.system_prompt))
        messages.append(UserMessage(ctx.text))
        return messages

    async def run(self, messages: Sequence[ChatMessage]) -> LoopOutcome:
        """One loop run with this agent's model, tools and limits."""
        return await run_loop(
            self.model,
            self.tools,
            messages,
            max_rounds=self.max_rounds,
            on_event=self.on_event,
        )

    async def invoke(self, ctx: AgentContext) -> AgentOutput:
        """Run the loop on ``ctx.text``; the answer, or raise what the caller should see."""
        outcome = await self.run(self.messages_for(ctx))
        if outcome.completed:
            return outcome.answer
        if outcome.tool_results:
            await ctx.add_artifact(
                [item.to_dict() for item in outcome.tool_results], TOOL_RESULTS_ARTIFACT
            )
        raise outcome_error(outcome, model_name=getattr(self.model, "name", None))
