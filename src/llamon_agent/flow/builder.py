"""``GraphBuilder``: LangGraph flows with node kinds, for agents that fail informatively.

The fluent API::

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
typed state (pass ``state_schema``). Without a state type the state is one dict that
every node's returned dict is merged into (a later node's key wins), so each node sees
everything before it. ``node_kind`` travels into a failed answer as
``data.node.kind``. A node may *return* ``HITLInterrupt`` to ask the caller: the flow pauses
(input-required); the caller's answer resumes it at that node, which runs again from its
top with the answer in the state. LangGraph 1.2's ``retry_policy`` and ``timeout`` pass
through; a node timeout is ``UPSTREAM_TIMEOUT``.

Runner events (inside an ``event_scope``, e.g. an A2A task whose server has an
``EventBus``): ``node.started``, then ``node.completed``, ``node.failed`` (the failure's
reason and code in ``trace_metadata``) or ``node.interrupted`` (the node asked the
caller); ``node`` names the node, ``trace_metadata.node_kind`` its kind.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, Self

from llamon_agent._extras import requires_extra
from llamon_agent.core.codes import Stage
from llamon_agent.core.events import emit, failure_metadata, observed
from llamon_agent.core.failures import FailureRecord
from llamon_agent.core.hitl import DEFAULT_RESUME_KEY, HITLInterrupt
from llamon_agent.core.telemetry import flow_node_span, mark_exception

with requires_extra("langgraph", "llamon_agent.flow"):
    from langgraph._internal._runnable import RunnableCallable
    from langgraph._internal._typing import MISSING
    from langgraph.channels.base import BaseChannel
    from langgraph.channels.binop import BinaryOperatorAggregate
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.errors import EmptyChannelError, GraphBubbleUp, GraphInterrupt
    from langgraph.graph import END, START, StateGraph
    from langgraph.pregel._write import ChannelWrite, ChannelWriteEntry, ChannelWriteTupleEntry
    from langgraph.types import RetryPolicy, TimeoutPolicy, interrupt

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

__all__ = [
    "COMPLETED_CHANNEL",
    "DEFAULT_NODE_KIND",
    "END",
    "HITL_MARKER",
    "START",
    "GraphBuilder",
    "merge_state",
    "node_kinds",
    "resume_key",
    "untyped_state",
]

DEFAULT_NODE_KIND = "node"
HITL_MARKER = "llamon.hitl"
"""Key of the interrupt value a node's ``HITLInterrupt`` becomes (read by the server)."""

_KINDS_ATTRIBUTE = "llamon_node_kinds"
_ROOT_CHANNEL = "__root__"  # LangGraph's one channel of a state that is not a TypedDict

COMPLETED_CHANNEL = "llamon:completed"
"""The checkpoint channel where a ``GraphBuilder`` flow keeps its completed nodes.

Its value is ``{"since": step, "outputs": {node: output}}``: each node's latest output
(the ``result`` its task shows in the state history) in the order the nodes first
finished, over every step applied to the thread's state. ``since`` is the step of the
run input that started the channel: ``0`` (a new thread's first input) when it covers
the whole thread; a thread begun without the channel has a later ``since`` and is read
from its history. Two cases are recorded where the history shows nothing or otherwise:
a state written with ``update_state(..., as_node=node)`` counts as ``node`` finishing
with that update, and in a step that runs both ``Send`` tasks and edge-triggered nodes,
nodes are ordered as they were added.
"""


def merge_state(current: Any, update: Any) -> Any:
    """The untyped state after a node's update: a dict merged into a dict (the update's
    keys win); any other update replaces the state (a node may return a plain value)."""
    if isinstance(current, Mapping) and isinstance(update, Mapping):
        return {**current, **update}
    return update


class _MergedState(BinaryOperatorAggregate[Any]):
    """The one channel of an untyped state: ``merge_state`` over every node's update.

    Readers get a copy, so nothing outside the channel changes the stored state in place
    (LangGraph adds ``__interrupt__`` to the values it reads for a stream; on the stored
    dict itself that key would be saved into the checkpoint).
    """

    def __hash__(self) -> int:  # ``Annotated`` metadata must be hashable
        return hash(self.operator)

    def get(self) -> Any:
        value = super().get()
        return dict(value) if isinstance(value, dict) else value


def untyped_state() -> Any:
    """The state type of a ``GraphBuilder()`` without one: a dict that every node's
    returned dict is merged into (LangGraph's plain ``dict`` keeps only the last return)."""
    return Annotated[dict, _MergedState(dict, merge_state)]


def node_kinds(graph: object) -> Mapping[str, str]:
    """The ``node_kind`` of each node of a graph compiled by ``GraphBuilder`` (else empty)."""
    kinds = getattr(graph, _KINDS_ATTRIBUTE, None)
    return kinds if isinstance(kinds, Mapping) else {}


class _ReadState(dict[Any, Any]):
    """The dict state a node is called with: it remembers the keys the node looked up
    (``state.get(k)``, ``state[k]``, ``k in state``) and did not find, in order."""

    __slots__ = ("missing",)

    def __init__(self, state: Mapping[Any, Any]) -> None:
        super().__init__(state)
        self.missing: list[Any] = []

    def _looked_up(self, key: Any) -> bool:
        found = dict.__contains__(self, key)
        if not found and key not in self.missing:
            self.missing.append(key)
        return found

    def __contains__(self, key: object) -> bool:
        return self._looked_up(key)

    def __getitem__(self, key: Any) -> Any:
        self._looked_up(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._looked_up(key)
        return super().get(key, default)


def _node_state(state: Any) -> Any:
    return _ReadState(state) if isinstance(state, dict) else state


def resume_key(request: HITLInterrupt, state: Any) -> str:
    """Where a text answer to ``request`` goes in the state of the node that returned it.

    ``request.resume_key`` when set; else the one key the node looked up in its state and
    did not find before returning the interrupt (``state.get("birthday")`` ->
    ``"birthday"``); else ``DEFAULT_RESUME_KEY`` (none, or several, were missing).
    """
    if request.resume_key:
        return request.resume_key
    missing = state.missing if isinstance(state, _ReadState) else []
    if len(missing) == 1 and isinstance(missing[0], str):
        return missing[0]
    return DEFAULT_RESUME_KEY


def _resume_update(request: HITLInterrupt, answer: Any, state: Any) -> dict[str, Any]:
    if isinstance(answer, Mapping):
        return dict(answer)
    return {resume_key(request, state): answer}


def _interrupt_value(request: HITLInterrupt) -> dict[str, Any]:
    return {
        HITL_MARKER: True,
        "payload": dict(request.payload),
        "kind": request.kind,
        "thread_id": request.thread_id,
    }


class _NodeEvents:
    """The ``node.*`` events of one node call (nothing is built when nobody listens)."""

    __slots__ = ("kind", "name", "on")

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind
        self.on = observed()
        if self.on:
            emit("node.started", Stage.FLOW_NODE, node=name, metadata={"node_kind": kind})

    def completed(self) -> None:
        if self.on:
            emit("node.completed", Stage.FLOW_NODE, node=self.name, metadata=self._kind())

    def raised(self, exc: BaseException) -> None:
        if not self.on:
            return
        if isinstance(exc, GraphInterrupt):
            emit("node.interrupted", Stage.FLOW_NODE, node=self.name, metadata=self._kind())
        elif not isinstance(exc, GraphBubbleUp):  # LangGraph's own control flow
            record = FailureRecord.from_exception(exc, stage=Stage.FLOW_NODE, step_id=self.name)
            metadata = {**failure_metadata(record), "node_kind": self.kind}
            emit("node.failed", Stage.FLOW_NODE, node=self.name, metadata=metadata)

    def _kind(self) -> dict[str, object]:
        return {"node_kind": self.kind}


def _wrap(
    fn: Callable[..., Any], name: str = "node", kind: str = DEFAULT_NODE_KIND
) -> Callable[..., Any]:
    """Turn a returned ``HITLInterrupt`` into LangGraph's ``interrupt()``; emit the node's
    runner events.

    On resume LangGraph runs the node again; the wrapper then gets the caller's answer from
    ``interrupt()``, merges it into the state (a text answer under ``resume_key``) and
    calls the node once more, so the node's own code sees the answer
    (``state.get("birthday")``).
    """
    if inspect.iscoroutinefunction(fn):

        async def run_async(state: Any) -> Any:
            events = _NodeEvents(name, kind)
            try:
                called = _node_state(state)
                result = await fn(called)
                answers: dict[str, Any] = {}
                while isinstance(result, HITLInterrupt):
                    update = _resume_update(result, interrupt(_interrupt_value(result)), called)
                    answers.update(update)
                    state = {**state, **update} if isinstance(state, Mapping) else state
                    called = _node_state(state)
                    result = await fn(called)
            except BaseException as exc:
                events.raised(exc)
                raise
            events.completed()
            return _merge(answers, result)

        run_async.__name__ = getattr(fn, "__name__", "node")
        return run_async

    def run(state: Any) -> Any:
        events = _NodeEvents(name, kind)
        try:
            called = _node_state(state)
            result = fn(called)
            answers: dict[str, Any] = {}
            while isinstance(result, HITLInterrupt):
                update = _resume_update(result, interrupt(_interrupt_value(result)), called)
                answers.update(update)
                state = {**state, **update} if isinstance(state, Mapping) else state
                called = _node_state(state)
                result = fn(called)
        except BaseException as exc:
            events.raised(exc)
            raise
        events.completed()
        return _merge(answers, result)

    run.__name__ = getattr(fn, "__name__", "node")
    return run


def _traced(fn: Callable[..., Any], flow: str, node: str, kind: str) -> Callable[..., Any]:
    """Run each call of node ``fn`` under its ``flow_node {node}`` span (``core.telemetry``).

    A failure is marked by the failure rule (stage ``flow_node``); a pause
    (LangGraph's interrupt) is not a failure.
    """
    if inspect.iscoroutinefunction(fn):

        async def traced_async(state: Any) -> Any:
            with _node_span(flow, node, kind):
                return await fn(state)

        traced_async.__name__ = fn.__name__
        return traced_async

    def traced(state: Any) -> Any:
        with _node_span(flow, node, kind):
            return fn(state)

    traced.__name__ = fn.__name__
    return traced


@contextmanager
def _node_span(flow: str, node: str, kind: str) -> Iterator[None]:
    """The node's ``flow_node`` span around the block; an exception (not LangGraph's
    interrupt) marks it failed, then goes on."""
    with flow_node_span(flow, node, kind) as span:
        try:
            yield
        except GraphBubbleUp:
            raise
        except Exception as exc:
            mark_exception(span, exc, stage=Stage.FLOW_NODE)
            raise


def _merge(answers: dict[str, Any], result: Any) -> Any:
    """The node's update plus the caller's answers (the node's own keys win)."""
    if isinstance(result, _ReadState):  # the node returned its own state
        result = dict(result)
    if not answers:
        return result
    if result is None:
        return answers
    if isinstance(result, Mapping):
        return {**answers, **result}
    return result


def _output(update: Sequence[Any]) -> Any:
    """The result in a ``(node, result)`` update; ``(node,)`` stands for ``{}``."""
    return update[1] if len(update) > 1 else {}


class _CompletedNodes(BaseChannel[Any, tuple[str, Any], Any]):
    """``COMPLETED_CHANNEL``: the completed nodes of the thread and their latest outputs.

    Each update is ``(node, output)`` from a node that finished in the step
    (``(node,)`` when the output is ``{}``), or ``(START, step)`` from the input of a
    run. The outputs of one step are applied in the order the state history lists that
    step's tasks (the nodes in the order they were added), so the first-finished order
    and the last output match the history's.
    """

    __slots__ = ("rank", "value")

    def __init__(self, rank: Mapping[str, int]) -> None:
        super().__init__(dict)
        self.rank = rank
        self.value: Any = MISSING

    @property
    def ValueType(self) -> Any:  # noqa: N802 - LangGraph's channel interface
        return dict

    @property
    def UpdateType(self) -> Any:  # noqa: N802 - LangGraph's channel interface
        return tuple

    def copy(self) -> Self:
        copied = type(self)(self.rank)
        copied.key = self.key
        copied.value = self.value
        return copied

    def from_checkpoint(self, checkpoint: Any) -> Self:
        restored = type(self)(self.rank)
        restored.key = self.key
        if isinstance(checkpoint, dict):
            restored.value = checkpoint
        return restored

    def update(self, values: Sequence[tuple[str, Any]]) -> bool:
        if not values:
            return False
        if self.value is MISSING:
            since = next((value[1] for value in values if value[0] == START), None)
            outputs: dict[str, Any] = {}
        else:
            since = self.value["since"]
            outputs = dict(self.value["outputs"])
        if len(values) == 1:  # one node finished in the step: nothing to order
            if values[0][0] != START:
                outputs[values[0][0]] = _output(values[0])
        else:
            last = len(self.rank)
            finished = [update for update in values if update[0] != START]
            for update in sorted(finished, key=lambda update: self.rank.get(update[0], last)):
                outputs[update[0]] = _output(update)
        self.value = {"since": since, "outputs": outputs}
        return True

    def get(self) -> Any:
        if self.value is MISSING:
            raise EmptyChannelError()
        return self.value

    def is_available(self) -> bool:
        return self.value is not MISSING

    def checkpoint(self) -> Any:
        return self.value


def _fold_writes(writes: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """Writes per channel, several writes to one channel as ``{"$writes": [...]}`` (as
    LangGraph shows a task's result)."""
    folded: dict[str, Any] = {}
    for channel, value in writes:
        existing = folded.get(channel)
        if existing is None:
            folded[channel] = value
            continue
        several = isinstance(existing, dict) and "$writes" in existing and len(existing) == 1
        folded[channel] = {"$writes": [*(existing["$writes"] if several else [existing]), value]}
    return folded


def _task_result(writes: Sequence[tuple[str, Any]], output_keys: str | Sequence[str]) -> Any:
    """The ``result`` the state history shows for a finished task with these writes."""
    if isinstance(output_keys, str):
        kept = [write for write in writes if write[0] == output_keys]
        if len(kept) == 1:
            return kept[0][1]
        return _fold_writes(kept).get(output_keys) if kept else None
    kept = [write for write in writes if write[0] in output_keys]
    return _fold_writes(kept) if kept else {}


def _completed_entry(
    name: str,
    state_writes: Callable[[Any], Sequence[tuple[str, Any]] | None],
    output_keys: str | Sequence[str],
) -> ChannelWriteTupleEntry:
    """The write of node ``name``'s output to ``COMPLETED_CHANNEL`` when it finishes."""

    root = output_keys == _ROOT_CHANNEL

    def completed(output: Any) -> Sequence[tuple[str, Any]]:
        if root and type(output) is dict:  # an untyped state's update is its own result
            result: Any = output
        else:
            result = _task_result(state_writes(output) or (), output_keys)
        if result is None:
            return ()
        # An empty result goes as ``(name,)``: ``get_graph`` runs every writer on an empty
        # state and hashes the written values.
        return ((COMPLETED_CHANNEL, (name, result) if result != {} else (name,)),)

    return ChannelWriteTupleEntry(mapper=completed)


def _mark_start(value: Any, config: RunnableConfig) -> Any:
    """Tell ``COMPLETED_CHANNEL`` the step of a run's input (``0`` on a new thread)."""
    step = (config.get("metadata") or {}).get("langgraph_step")
    ChannelWrite.do_write(config, [ChannelWriteEntry(COMPLETED_CHANNEL, (START, step))])
    return value


def _record_completed(compiled: Any, names: Sequence[str]) -> None:
    """Make ``compiled`` keep its completed nodes and their outputs in
    ``COMPLETED_CHANNEL``, read back with the thread's latest checkpoint."""
    nodes = compiled.nodes
    writers = [nodes[name].writers for name in names]
    if not all(w and isinstance(w[0], ChannelWrite) and w[0].writes for w in writers):
        return  # not the layout this was written for: the history is read instead
    compiled.channels[COMPLETED_CHANNEL] = _CompletedNodes(
        {name: rank for rank, name in enumerate(names)}
    )
    output_keys = compiled.output_channels
    for name, node_writers in zip(names, writers, strict=True):
        # One more entry in the node's own state write, not another writer: no extra
        # runnable per step.
        first = node_writers[0]
        entry = _completed_entry(name, first.writes[0].mapper, output_keys)
        node_writers[0] = ChannelWrite((*first.writes, entry), tags=first.tags)
        _forget_combined_writers(nodes[name])
    nodes[START].writers.append(RunnableCallable(_mark_start, name="llamon_start", trace=False))
    _forget_combined_writers(nodes[START])


def _forget_combined_writers(node: Any) -> None:
    """Drop what a ``PregelNode`` built from its writers, should anything have read it."""
    for cached in ("flat_writers", "node"):
        node.__dict__.pop(cached, None)


class GraphBuilder:
    """A fluent builder over LangGraph's ``StateGraph`` that records each node's kind."""

    def __init__(self, state_schema: type[Any] | None = None, *, name: str = "flow") -> None:
        self.name = name
        self._graph: StateGraph[Any] = StateGraph(state_schema or untyped_state())
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
            _traced(_wrap(fn, name, node_kind), self.name, name, node_kind),
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
        _record_completed(compiled, list(self._kinds))
        return compiled
