"""``GraphBuilder``: LangGraph flows with node kinds, for agents that fail informatively.

The fluent API of seed 000::

    builder = (
        GraphBuilder()
        .node("fetch_subject", fetch_subject_node, node_kind="business")
        .node("rag_search", rag_search_node, node_kind="business")
        .node("generate_response", generate_response_node, node_kind="llm")
        .edge(START, "fetch_subject")
        .edge("fetch_subject", "rag_search")
        .edge("rag_search", "generate_response")
        .edge("generate_response", END)
    )
    graph = builder.compile(checkpointer=InMemorySaver())

Nodes may be sync or async and take the state as a dict (``state.get("query")``) or a
typed state (pass ``state_schema``). ``node_kind`` travels into a failed answer as
``data.node.kind``. A node may *return* ``HITLInterrupt`` to ask the caller: the flow pauses
(input-required); the caller's answer resumes it at that node, which runs again from its
top with the answer in the state. LangGraph 1.2's ``retry_policy`` and ``timeout`` pass
through; a node timeout is ``UPSTREAM_TIMEOUT``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Self

from llamon_agent._extras import requires_extra
from llamon_agent.core.hitl import HITLInterrupt

with requires_extra("langgraph", "llamon_agent.flow"):
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import RetryPolicy, TimeoutPolicy, interrupt

__all__ = ["DEFAULT_NODE_KIND", "END", "HITL_MARKER", "START", "GraphBuilder", "node_kinds"]

DEFAULT_NODE_KIND = "node"
HITL_MARKER = "llamon.hitl"
"""Key of the interrupt value a node's ``HITLInterrupt`` becomes (read by the server)."""

_KINDS_ATTRIBUTE = "llamon_node_kinds"


def node_kinds(graph: object) -> Mapping[str, str]:
    """The ``node_kind`` of each node of a graph compiled by ``GraphBuilder`` (else empty)."""
    kinds = getattr(graph, _KINDS_ATTRIBUTE, None)
    return kinds if isinstance(kinds, Mapping) else {}


def _resume_update(request: HITLInterrupt, answer: Any) -> dict[str, Any]:
    if isinstance(answer, Mapping):
        return dict(answer)
    return {request.resume_key or "answer": answer}


def _interrupt_value(request: HITLInterrupt) -> dict[str, Any]:
    return {
        HITL_MARKER: True,
        "payload": dict(request.payload),
        "kind": request.kind,
        "thread_id": request.thread_id,
    }


def _wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a returned ``HITLInterrupt`` into LangGraph's ``interrupt()``.

    On resume LangGraph runs the node again; the wrapper then gets the caller's answer from
    ``interrupt()``, merges it into the state and calls the node once more, so the node's
    own code sees the answer (``state.get("birthday")``).
    """
    if inspect.iscoroutinefunction(fn):

        async def run_async(state: Any) -> Any:
            result = await fn(state)
            answers: dict[str, Any] = {}
            while isinstance(result, HITLInterrupt):
                update = _resume_update(result, interrupt(_interrupt_value(result)))
                answers.update(update)
                state = {**state, **update} if isinstance(state, Mapping) else state
                result = await fn(state)
            return _merge(answers, result)

        run_async.__name__ = getattr(fn, "__name__", "node")
        return run_async

    def run(state: Any) -> Any:
        result = fn(state)
        answers: dict[str, Any] = {}
        while isinstance(result, HITLInterrupt):
            update = _resume_update(result, interrupt(_interrupt_value(result)))
            answers.update(update)
            state = {**state, **update} if isinstance(state, Mapping) else state
            result = fn(state)
        return _merge(answers, result)

    run.__name__ = getattr(fn, "__name__", "node")
    return run


def _merge(answers: dict[str, Any], result: Any) -> Any:
    """The node's update plus the caller's answers (the node's own keys win)."""
    if not answers:
        return result
    if result is None:
        return answers
    if isinstance(result, Mapping):
        return {**answers, **result}
    return result


class GraphBuilder:
    """A fluent builder over LangGraph's ``StateGraph`` that records each node's kind."""

    def __init__(self, state_schema: type[Any] | None = None, *, name: str = "flow") -> None:
        self.name = name
        self._graph: StateGraph[Any] = StateGraph(state_schema or dict)
        self._kinds: dict[str, str] = {}

    def node(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        node_kind: str = DEFAULT_NODE_KIND,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        timeout: float | timedelta | TimeoutPolicy | None = None,
        **kwargs: Any,
    ) -> Self:
        """Add node ``name`` running ``fn``; ``node_kind`` is reported when it fails."""
        if name in self._kinds:
            raise ValueError(f"node {name!r} is already in the flow")
        if not node_kind or not node_kind.isascii():
            raise ValueError(f"node_kind of {name!r} must be non-empty ASCII")
        self._graph.add_node(
            name,
            _wrap(fn),
            retry_policy=retry_policy,
            timeout=timeout,
            metadata={"llamon.node_kind": node_kind},
            **kwargs,
        )
        self._kinds[name] = node_kind
        return self

    def edge(self, start: str, end: str) -> Self:
        """Run ``end`` after ``start`` (``START`` / ``END`` for the flow's ends)."""
        self._graph.add_edge(start, end)
        return self

    def conditional_edges(
        self,
        source: str,
        path: Callable[
            ..., Hashable | Sequence[Hashable] | Awaitable[Hashable | Sequence[Hashable]]
        ],
        path_map: Mapping[Hashable, str] | Sequence[str] | None = None,
    ) -> Self:
        """After ``source``, go where ``path(state)`` says (mapped through ``path_map``)."""
        self._graph.add_conditional_edges(source, path, path_map)  # type: ignore[arg-type]
        return self

    def compile(
        self, *, checkpointer: BaseCheckpointSaver[Any] | None = None, **kwargs: Any
    ) -> Any:
        """The compiled LangGraph graph (a ``Pregel``), remembering each node's kind.

        Served flows always get a checkpointer (the server supplies one when you pass
        none), so a failure's context can be read back.
        """
        compiled = self._graph.compile(checkpointer=checkpointer, name=self.name, **kwargs)
        setattr(compiled, _KINDS_ATTRIBUTE, dict(self._kinds))
        return compiled
