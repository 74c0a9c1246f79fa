"""Serving a compiled LangGraph graph as an agent.

``GraphAgent`` runs the graph with the task id as its checkpoint thread, so a failed run
can be inspected afterwards and an interrupted one resumed. Input: ``{"query": text,
"thread_id": task_id, "data": [...]}``, limited to the keys the graph's input schema
declares (pass ``input_mapper`` to build your own). Output: ``state["output"]`` when
present (``output_key``), else the final state as a data part. ``interrupt(value)`` in a
node (or a ``GraphBuilder`` node returning ``HITLInterrupt``) ends the turn
``input-required`` with ``value`` as the payload; the caller's next message resumes the
graph with ``Command(resume=<the first data part, else the text>)``. A ``GraphBuilder``
node then sees a data answer merged into its state and a text answer under its resume
key (``llamon_agent.flow.builder.resume_key``: ``resume_key=``, else the one key it
looked up and did not find).

Failure context (which node failed, what completed before it) comes from
``failure_context``, the hook the A2A executor calls on any agent that has it; flows fill
it in from their checkpoints.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from llamon_agent._extras import requires_extra
from llamon_agent.a2a.agent import AgentContext, AgentOutput, Chunk, FinalOutput
from llamon_agent.core.flow_context import FlowContext
from llamon_agent.core.hitl import HITLInterrupt, InterruptKind
from llamon_agent.flow.builder import HITL_MARKER, GraphBuilder
from llamon_agent.flow.context import extract_flow_error_context

with requires_extra("langgraph", "llamon_agent.a2a.graph"):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.pregel import Pregel
    from langgraph.types import Command

__all__ = ["DEFAULT_RECURSION_LIMIT", "FlowContextHook", "GraphAgent", "is_compiled_graph"]

DEFAULT_RECURSION_LIMIT = 100
"""Steps a served graph may take before ``GraphRecursionError`` (LangGraph's own is 10007)."""

FlowContextHook = Callable[[Any, str], Any]
"""``async hook(graph, thread_id) -> FlowContext | None``: reads a failed run's checkpoint."""


def is_compiled_graph(obj: object) -> bool:
    """True for a compiled LangGraph graph (a ``Pregel``) or a ``GraphBuilder``."""
    return isinstance(obj, Pregel | GraphBuilder)


class GraphAgent:
    """A compiled LangGraph graph as an ``Agent`` (and ``StreamingAgent``)."""

    def __init__(
        self,
        graph: Any,
        *,
        input_mapper: Callable[[AgentContext], Mapping[str, Any]] | None = None,
        output_key: str = "output",
        recursion_limit: int = DEFAULT_RECURSION_LIMIT,
        context_hook: FlowContextHook | None = extract_flow_error_context,
    ) -> None:
        if isinstance(graph, GraphBuilder):
            graph = graph.compile(checkpointer=InMemorySaver())
        elif getattr(graph, "checkpointer", None) is None:
            graph.checkpointer = InMemorySaver()  # a served flow always has a checkpointer
        self.graph = graph
        self.name = str(getattr(graph, "name", None) or "graph")
        self.output_key = output_key
        self.recursion_limit = recursion_limit
        self.context_hook = context_hook
        self._input_mapper = input_mapper or self._default_input
        self._input_keys = _input_keys(graph)

    def _default_input(self, ctx: AgentContext) -> Mapping[str, Any]:
        state = {"query": ctx.text, "thread_id": ctx.task_id, "data": ctx.data}
        if self._input_keys is None:
            return state
        return {key: value for key, value in state.items() if key in self._input_keys}

    def _config(self, ctx: AgentContext) -> dict[str, Any]:
        return {
            "configurable": {"thread_id": ctx.task_id},
            "recursion_limit": self.recursion_limit,
        }

    def _input(self, ctx: AgentContext) -> Any:
        if ctx.resumed:
            return Command(resume=ctx.data[0] if ctx.data else ctx.text)
        return dict(self._input_mapper(ctx))

    def _result(self, state: Any) -> AgentOutput:
        if isinstance(state, Mapping):
            interrupts = state.get("__interrupt__")
            if interrupts:
                return _as_hitl(getattr(interrupts[0], "value", interrupts[0]))
            if self.output_key in state:
                output = state[self.output_key]
                if output is None or isinstance(output, str | Mapping):
                    return output
                return str(output)
            return {k: v for k, v in state.items() if not k.startswith("__")}
        return None if state is None else str(state)

    async def invoke(self, ctx: AgentContext) -> AgentOutput:
        """Run the graph to the end (or to an interrupt)."""
        return self._result(await self.graph.ainvoke(self._input(ctx), self._config(ctx)))

    async def stream(self, ctx: AgentContext) -> AsyncIterator[Chunk | FinalOutput]:
        """Yield what nodes write with ``get_stream_writer()``, then ``FinalOutput(output)``."""
        last_state: Any = None
        async for mode, item in self.graph.astream(
            self._input(ctx), self._config(ctx), stream_mode=["custom", "values"]
        ):
            if mode == "custom":
                yield item if isinstance(item, str | Mapping) else str(item)
            else:
                last_state = item
        yield FinalOutput(self._result(last_state))

    async def failure_context(self, ctx: AgentContext, exc: BaseException) -> FlowContext | None:
        """The failed node and completed nodes, when a context hook is set."""
        if self.context_hook is None:
            return None
        result = await self.context_hook(self.graph, ctx.task_id)
        return result if isinstance(result, FlowContext) else None


def _as_hitl(value: Any) -> HITLInterrupt:
    """An interrupt's value as the pause the caller sees."""
    if isinstance(value, Mapping) and value.get(HITL_MARKER):
        kind: InterruptKind = (
            "auth-required" if value.get("kind") == "auth-required" else "input-required"
        )
        return HITLInterrupt(
            payload=dict(value.get("payload") or {}), thread_id=value.get("thread_id"), kind=kind
        )
    return HITLInterrupt(payload=value if isinstance(value, Mapping) else {"question": str(value)})


def _input_keys(graph: Any) -> frozenset[str] | None:
    try:
        schema = graph.get_input_jsonschema()
    except Exception:
        return None
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return frozenset(properties) if isinstance(properties, Mapping) else None
