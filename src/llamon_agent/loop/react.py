"""The tool loop as a LangGraph graph: ``build_react_graph(model, tools)``.

::

    graph = build_react_graph(model, registry.view("search_orders"), system_prompt="...")
    state = await graph.ainvoke({"query": "Where is order 42?"})
    state["output"]                                  # the model's final answer
    app = create_app(graph, card)                    # or serve it over A2A as it is

Three nodes: ``prompt`` opens the turn (the system prompt on a thread's first turn, then
the caller's ``query`` as a user message), ``agent`` calls the model (``complete_model``,
as ``run_loop`` does) with the transcript and the tools' specs, ``tools`` runs the calls
the model wrote. The graph ends when the model answers with text (``state["output"]``);
otherwise ``agent`` and ``tools`` alternate. Each cycle costs two of LangGraph's steps,
so a model that never stops calling tools hits the recursion limit:
``GraphRecursionError``, which an A2A caller receives as ``UPSTREAM_UNAVAILABLE`` /
``max_tool_iterations_exceeded``, retriable.

Every tool call goes through the native loop's own per-call code, a ``ToolDispatcher``
(``run_tool_calls``): look the name up, parse ``arguments_json``, validate, block a
repeat of the call just before it, run. The four failures and the repeat guard come back
to the model as ``is_error`` tool messages under the call's id and the loop goes on, word
for word as in ``run_loop``. A ``ToolLike`` whose ``call`` raises (an MCP tool's third
transport failure in one request) escalates: its exception propagates and fails the run.
A model answer with neither tool calls nor text raises what ``LoopAgent`` raises for it
(``UPSTREAM_UNAVAILABLE`` / ``invalid_model_response``, retriable); a model call that
raises propagates as it is.

The state is checkpointer-safe: ``messages`` holds JSON dicts (``message_to_dict`` /
``message_from_dict`` convert), and the repeat guard's memory is the JSON list
``last_call``.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, assert_never

from typing_extensions import TypedDict  # pydantic's JSON schema (Python < 3.12)

from llamon_agent._extras import requires_extra
from llamon_agent.core.failures import FailureRecord
from llamon_agent.loop.dispatch import ToolDispatcher, ToolEscalation
from llamon_agent.loop.model import (
    AssistantMessage,
    ChatMessage,
    Model,
    ModelResponse,
    RawToolCall,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from llamon_agent.loop.model_call import complete_model
from llamon_agent.loop.outcome import LoopOutcome, ToolCallResult, outcome_error
from llamon_agent.loop.tools import ToolRegistry, Tools, ToolView

with requires_extra("langgraph", "llamon_agent.loop.react"):
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.state import CompiledStateGraph
    from langgraph.types import Checkpointer

__all__ = [
    "ReactInput",
    "ReactState",
    "ToolRound",
    "Tools",
    "build_react_graph",
    "message_from_dict",
    "message_to_dict",
    "run_tool_calls",
]

PROMPT_NODE: Final = "prompt"
AGENT_NODE: Final = "agent"
TOOLS_NODE: Final = "tools"


# ---------------------------------------------------------------- messages as JSON


def message_to_dict(message: ChatMessage) -> dict[str, Any]:
    """A ``ChatMessage`` as a JSON-ready dict (``role`` plus the dataclass's fields;
    an assistant's ``tool_calls`` as a list of ``{id, name, arguments_json}``)."""
    if isinstance(message, AssistantMessage):
        return {
            "role": "assistant",
            "content": message.content,
            "tool_calls": [
                {"id": call.id, "name": call.name, "arguments_json": call.arguments_json}
                for call in message.tool_calls
            ],
        }
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "name": message.name,
            "content": message.content,
            "is_error": message.is_error,
        }
    if isinstance(message, SystemMessage | UserMessage):
        return {"role": message.role, "content": message.content}
    assert_never(message)


def message_from_dict(data: Mapping[str, Any]) -> ChatMessage:
    """The ``ChatMessage`` of a ``message_to_dict`` dict; an unknown ``role`` raises
    ``ValueError``."""
    role = data.get("role")
    if role == "system":
        return SystemMessage(str(data.get("content") or ""))
    if role == "user":
        return UserMessage(str(data.get("content") or ""))
    if role == "assistant":
        calls = tuple(
            RawToolCall(id=call["id"], name=call["name"], arguments_json=call["arguments_json"])
            for call in data.get("tool_calls") or ()
        )
        return AssistantMessage(content=data.get("content"), tool_calls=calls)
    if role == "tool":
        return ToolMessage(
            tool_call_id=data["tool_call_id"],
            name=data["name"],
            content=data["content"],
            is_error=bool(data.get("is_error", False)),
        )
    raise ValueError(f"not a chat message: role {role!r}")


# ---------------------------------------------------------------- one round of tool calls


@dataclass(frozen=True, slots=True)
class ToolRound:
    """What ``run_tool_calls`` did: one ``ToolMessage`` and one ``ToolCallResult`` per
    call, in order, and the repeat guard's memory for the next round (``previous``)."""

    messages: tuple[ToolMessage, ...]
    results: tuple[ToolCallResult, ...]
    previous: tuple[str, str] | None


async def run_tool_calls(
    tools: ToolView | ToolRegistry,
    calls: Sequence[RawToolCall],
    *,
    previous: tuple[str, str] | None = None,
    round_number: int = 1,
) -> ToolRound:
    """Run one round of raw tool calls with the native loop's own per-call code.

    Each call is looked up, parsed, validated, checked against the call just before it
    (``previous``: the ``(name, arguments_json)`` of the last call of the round before;
    None for a fresh run) and run by a ``ToolDispatcher``, exactly as ``run_loop`` does;
    a failure is an ``is_error`` ``ToolMessage``. A ``ToolLike`` whose ``call`` raises
    ends the round: its exception is raised here, as it was (the calls after it do not
    run).
    """
    dispatcher = ToolDispatcher(tools, previous=previous)
    messages: list[ToolMessage] = []
    for call in calls:
        done = await dispatcher.dispatch(call, round_number=round_number)
        if isinstance(done, ToolEscalation):
            raise done.exception  # the tool's exception, with its own cause
        messages.append(done)
    return ToolRound(tuple(messages), dispatcher.results, dispatcher.previous)


# ---------------------------------------------------------------- the graph


class ReactInput(TypedDict):
    """What a run starts from: the caller's text."""

    query: str


class ReactState(TypedDict, total=False):
    """The graph's state; every value is JSON.

    ``messages`` (appended to by each node) is the transcript as ``message_to_dict``
    dicts; ``output`` the final answer (None until the model answers with text);
    ``rounds`` the model calls of this turn; ``last_call`` the ``[name, arguments_json]``
    the repeat guard compares the next call with.
    """

    query: str
    messages: Annotated[list[dict[str, Any]], operator.add]
    output: str | None
    rounds: int
    last_call: list[str] | None


def _invalid_response(
    model: Model, round_number: int, message: str, evidence: dict[str, object]
) -> BaseException:
    """What ``LoopAgent`` raises for an ``invalid_model_response`` run."""
    record = FailureRecord.of(
        "invalid_model_response", message, evidence={"round": round_number, **evidence}
    )
    outcome = LoopOutcome(
        status="invalid_model_response",
        answer=None,
        transcript=(),
        tool_results=(),
        failures=(record,),
        rounds=round_number,
        model_retries=0,
        run_id="",
    )
    return outcome_error(outcome, model_name=getattr(model, "name", None))


def build_react_graph(
    model: Model,
    tools: Tools,
    *,
    system_prompt: str | None = None,
    name: str = "react",
    checkpointer: Checkpointer = None,
) -> CompiledStateGraph[ReactState, None, ReactInput, ReactState]:
    """A compiled LangGraph ReAct graph over ``model`` and ``tools`` (see the module
    docstring). Input ``{"query": text}``; the final state has ``output``, ``messages``.

    ``tools``: a view, a registry (each step sees its tools as they are then), or an
    iterable of tools/functions (registered once, here). MCP tools are per-request
    objects: build the graph inside the loader's ``session()``. ``checkpointer`` is
    passed to ``compile`` (``GraphAgent`` adds an in-memory one when there is none).
    """
    fixed = None if isinstance(tools, ToolRegistry) else ToolView.of(tools)

    def current() -> ToolView:
        return fixed if fixed is not None else ToolView.of(tools)

    def prompt(state: ReactState) -> dict[str, Any]:
        opening: list[ChatMessage] = []
        if system_prompt and not state.get("messages"):
            opening.append(SystemMessage(system_prompt))
        opening.append(UserMessage(str(state.get("query") or "")))
        return {
            "messages": [message_to_dict(m) for m in opening],
            "output": None,
            "rounds": 0,
            "last_call": None,
        }

    async def agent(state: ReactState) -> dict[str, Any]:
        transcript = tuple(message_from_dict(m) for m in state.get("messages") or ())
        round_number = int(state.get("rounds") or 0) + 1
        response = await complete_model(model, transcript, current().specs())
        if not isinstance(response, ModelResponse):
            raise _invalid_response(
                model,
                round_number,
                "The model adapter returned something other than a ModelResponse.",
                {"error_type": type(response).__name__},
            )
        calls = tuple(response.tool_calls or ())
        said = AssistantMessage(content=response.content, tool_calls=calls)
        update: dict[str, Any] = {"messages": [message_to_dict(said)], "rounds": round_number}
        if calls:
            return update
        text = response.content if isinstance(response.content, str) else ""
        if not text.strip():
            raise _invalid_response(
                model,
                round_number,
                "The model answered with neither a tool call nor any text.",
                {"content_present": response.content is not None},
            )
        return {**update, "output": text}

    async def run_tools(state: ReactState) -> dict[str, Any]:
        messages = state.get("messages") or []
        last = message_from_dict(messages[-1]) if messages else None
        calls = last.tool_calls if isinstance(last, AssistantMessage) else ()
        remembered = state.get("last_call")
        previous = (remembered[0], remembered[1]) if remembered else None
        done = await run_tool_calls(
            current(), calls, previous=previous, round_number=int(state.get("rounds") or 1)
        )
        return {
            "messages": [message_to_dict(m) for m in done.messages],
            "last_call": list(done.previous) if done.previous is not None else None,
        }

    def after_agent(state: ReactState) -> str:
        messages = state.get("messages") or []
        last = message_from_dict(messages[-1]) if messages else None
        return TOOLS_NODE if isinstance(last, AssistantMessage) and last.tool_calls else END

    builder = StateGraph(ReactState, input_schema=ReactInput)
    builder.add_node(PROMPT_NODE, prompt)
    builder.add_node(AGENT_NODE, agent)
    builder.add_node(TOOLS_NODE, run_tools)
    builder.add_edge(START, PROMPT_NODE)
    builder.add_edge(PROMPT_NODE, AGENT_NODE)
    builder.add_conditional_edges(AGENT_NODE, after_agent, [TOOLS_NODE, END])
    builder.add_edge(TOOLS_NODE, AGENT_NODE)
    return builder.compile(checkpointer=checkpointer, name=name)
