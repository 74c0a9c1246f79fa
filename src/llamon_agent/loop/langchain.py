"""Our tools as LangChain tools: ``to_langchain_tools(tools)`` for LangGraph's prebuilt agents.

::

    async with MCPToolLoader(server).session() as mcp_tools:
        agent = create_react_agent(chat_model, to_langchain_tools(mcp_tools))
        await agent.ainvoke({"messages": [("user", "Order Dune")]})

Each ``ToolLike`` (a ``Tool``, an MCP tool, your own) becomes a
``langchain_core.tools.StructuredTool`` with the tool's name, description and JSON schema
(``args_schema``). Calling it runs the native loop's per-call code (a ``ToolDispatcher``):
parse, validate, run, turn the tool's own result type into a ``ToolResult``. What the
LangChain side gets:

* success -- the text the native loop shows the model (a string as is, else JSON) as the
  content, and the raw value as the artifact (``response_format="content_and_artifact"``);
* a failure (invalid arguments, the handler raised, the tool's own failure, an MCP
  observation such as ``Missing required argument: title``) -- the same one-line text the
  native loop would show, as a ``ToolMessage`` with ``status="error"`` when called with a
  tool call (a plain string when called with arguments): it is raised as a
  ``ToolException`` and the tool is built with ``handle_tool_error=True``;
* an escalation (a ``ToolLike``'s ``call`` raised: an MCP tool's third transport failure
  in one request) -- the exception propagates, as in the native loop, and fails the run.

A standalone tool has no run around it, so the native loop's repeat guard (the same call
twice in a row is not run again) does not apply here.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from llamon_agent._extras import requires_extra
from llamon_agent.loop.dispatch import ToolDispatcher, ToolEscalation
from llamon_agent.loop.model import RawToolCall
from llamon_agent.loop.tools import ToolLike, Tools, ToolView

with requires_extra("langgraph", "llamon_agent.loop.langchain"):
    from langchain_core.tools import StructuredTool, ToolException

__all__ = ["to_langchain_tools"]

_CALL_ID = "langchain"
"""The id of the raw call made for one LangChain invocation (seen only in failure records)."""


def _args_schema(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The tool's JSON schema as LangChain wants it: an object schema with ``properties``."""
    schema: dict[str, Any] = copy.deepcopy(dict(parameters or {}))
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def _structured(tool: ToolLike) -> StructuredTool:
    alone = ToolView([tool])

    async def call(**arguments: Any) -> tuple[str, Any]:
        # the arguments travel as JSON, as a model's do: the loop parses them at its boundary
        raw = RawToolCall(_CALL_ID, tool.name, json.dumps(arguments, default=str))
        dispatcher = ToolDispatcher(alone)  # a fresh one per call: no repeat guard
        done = await dispatcher.dispatch(raw)
        if isinstance(done, ToolEscalation):
            raise done.exception  # as in the native loop, it fails the run
        if done.is_error:
            raise ToolException(done.content)
        [made] = dispatcher.results
        return done.content, made.result.value

    return StructuredTool(
        name=tool.name,
        description=tool.description or tool.name,
        args_schema=_args_schema(tool.parameters),
        coroutine=call,
        response_format="content_and_artifact",
        handle_tool_error=True,
    )


def to_langchain_tools(tools: Tools) -> list[StructuredTool]:
    """``StructuredTool``\\s for ``tools`` (a view, a registry, or an iterable of tools,
    MCP tools or functions), in order; see the module docstring. Async only: LangChain's
    sync ``invoke`` raises ``NotImplementedError``."""
    return [_structured(tool) for tool in ToolView.of(tools)]
