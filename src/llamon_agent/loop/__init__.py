"""The native tool-calling loop: tools, registry and views, ``ToolResult``, ``run_loop``.

Every failure in the loop has a name: four tool-call failures and a repeat
guard come back to the model as observations and the loop goes on; an empty model answer
and running out of rounds end the run with a typed status. Nothing raises out of
``run_loop``; see ``docs/tool-loop.md``. The LangGraph form of the loop
(``build_react_graph``) and ``to_langchain_tools`` need ``llamon-agent[langgraph]``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from llamon_agent.loop.agent import TOOL_RESULTS_ARTIFACT, LoopAgent, outcome_error
from llamon_agent.loop.dispatch import ToolDispatcher
from llamon_agent.loop.events import EventHandler, LoopEvent
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
from llamon_agent.loop.outcome import LoopOutcome, LoopStatus, ToolCallResult
from llamon_agent.loop.result import ToolResult
from llamon_agent.loop.runner import DEFAULT_MAX_ROUNDS, run_loop
from llamon_agent.loop.scripted import ScriptedModel, ScriptExhaustedError, tool_call
from llamon_agent.loop.tools import Tool, ToolLike, ToolRegistry, ToolView, tool

if TYPE_CHECKING:
    from llamon_agent.loop.langchain import to_langchain_tools
    from llamon_agent.loop.react import (
        ReactInput,
        ReactState,
        ToolRound,
        build_react_graph,
        message_from_dict,
        message_to_dict,
        run_tool_calls,
    )

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

_LANGGRAPH_NAMES = {
    "to_langchain_tools": "llamon_agent.loop.langchain",
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
}


def __getattr__(name: str) -> Any:
    """The LangGraph pieces (``build_react_graph``, ``to_langchain_tools`` ...) load
    LangGraph on first use; without ``llamon-agent[langgraph]`` they raise ``ImportError``."""
    if name in _LANGGRAPH_NAMES:
        return getattr(import_module(_LANGGRAPH_NAMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
