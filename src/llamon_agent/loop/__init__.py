"""The native tool-calling loop: tools, registry and views, ``ToolResult``, ``run_loop``.

Every failure in the loop has a name: four tool-call failures and a repeat
guard come back to the model as observations and the loop goes on; an empty model answer
and running out of rounds end the run with a typed status. Nothing raises out of
``run_loop``; see ``docs/tool-loop.md``. The LangGraph form of the loop
(``build_react_graph``) and ``to_langchain_tools`` need ``llamon-agent[langgraph]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llamon_agent._lazy import lazy_exports

if TYPE_CHECKING:
    from llamon_agent.a2a.loop_agent import TOOL_RESULTS_ARTIFACT, LoopAgent
    from llamon_agent.loop.dispatch import ToolDispatcher
    from llamon_agent.loop.events import EventHandler, LoopEvent
    from llamon_agent.loop.langchain import to_langchain_tools
    from llamon_agent.loop.model import (
        AssistantMessage,
        ChatMessage,
        Model,
        ModelResponse,
        RawToolCall,
        SystemMessage,
        ToolMessage,
        ToolSpec,
        UserMessage,
    )
    from llamon_agent.loop.outcome import LoopOutcome, LoopStatus, ToolCallResult, outcome_error
    from llamon_agent.loop.react import (
        ReactInput,
        ReactState,
        ToolRound,
        build_react_graph,
        message_from_dict,
        message_to_dict,
        run_tool_calls,
    )
    from llamon_agent.loop.result import ToolResult
    from llamon_agent.loop.runner import DEFAULT_MAX_ROUNDS, run_loop
    from llamon_agent.loop.scripted import ScriptedModel, ScriptExhaustedError, tool_call
    from llamon_agent.loop.tools import Tool, ToolLike, ToolRegistry, ToolView, tool

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "TOOL_RESULTS_ARTIFACT",
    "AssistantMessage",
    "ChatMessage",
    "EventHandler",
    "LoopAgent",
    "LoopEvent",
    "LoopOutcome",
    "LoopStatus",
    "Model",
    "ModelResponse",
    "RawToolCall",
    "ReactInput",
    "ReactState",
    "ScriptExhaustedError",
    "ScriptedModel",
    "SystemMessage",
    "Tool",
    "ToolCallResult",
    "ToolDispatcher",
    "ToolLike",
    "ToolMessage",
    "ToolRegistry",
    "ToolResult",
    "ToolRound",
    "ToolSpec",
    "ToolView",
    "UserMessage",
    "build_react_graph",
    "message_from_dict",
    "message_to_dict",
    "outcome_error",
    "run_loop",
    "run_tool_calls",
    "to_langchain_tools",
    "tool",
    "tool_call",
]

_HOMES: dict[str, str] = {
    **dict.fromkeys(("EventHandler", "LoopEvent"), "llamon_agent.loop.events"),
    "to_langchain_tools": "llamon_agent.loop.langchain",
    "ToolDispatcher": "llamon_agent.loop.dispatch",
    **dict.fromkeys(
        (
            "AssistantMessage",
            "ChatMessage",
            "Model",
            "ModelResponse",
            "RawToolCall",
            "SystemMessage",
            "ToolMessage",
            "ToolSpec",
            "UserMessage",
        ),
        "llamon_agent.loop.model",
    ),
    **dict.fromkeys(
        ("LoopOutcome", "LoopStatus", "ToolCallResult", "outcome_error"),
        "llamon_agent.loop.outcome",
    ),
    **dict.fromkeys(
        (
            "ReactInput",
            "ReactState",
            "ToolRound",
            "build_react_graph",
            "message_from_dict",
            "message_to_dict",
            "run_tool_calls",
        ),
        "llamon_agent.loop.react",
    ),
    "ToolResult": "llamon_agent.loop.result",
    **dict.fromkeys(("DEFAULT_MAX_ROUNDS", "run_loop"), "llamon_agent.loop.runner"),
    **dict.fromkeys(
        ("ScriptExhaustedError", "ScriptedModel", "tool_call"), "llamon_agent.loop.scripted"
    ),
    **dict.fromkeys(
        ("Tool", "ToolLike", "ToolRegistry", "ToolView", "tool"), "llamon_agent.loop.tools"
    ),
}
"""Where each public name of the loop lives; it is loaded from there on first use, so
importing one part of the loop does not load the others."""

_A2A_NAMES = frozenset({"TOOL_RESULTS_ARTIFACT", "LoopAgent"})
"""Public here, defined in ``llamon_agent.a2a.loop_agent`` (the loop served over A2A)."""


_load, __dir__ = lazy_exports(__name__, _HOMES, __all__)


def __getattr__(name: str) -> Any:
    """Each public name loads its module on first use. The LangGraph pieces
    (``build_react_graph``, ``to_langchain_tools`` ...) need ``llamon-agent[langgraph]``
    (else ``ImportError``); ``LoopAgent`` loads the A2A layer it adapts the loop to."""
    if name in _A2A_NAMES:
        # The A2A adapter of the loop sits a layer above it; ``from llamon_agent.loop
        # import LoopAgent`` is public, so it is resolved here, on first use only: the one
        # upward import the layer contract allows in the loop (tests/test_layers.py).
        from llamon_agent.a2a import loop_agent

        value = getattr(loop_agent, name)
        globals()[name] = value
        return value
    return _load(name)
