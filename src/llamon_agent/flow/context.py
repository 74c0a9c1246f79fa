"""Where a failed flow stopped: read back from its checkpoints, never from exception text.

``extract_flow_error_context(graph, thread_id)`` returns the failed node's id (from the
state's ``next``) and kind, the completed nodes in the order they finished, and their
outputs (the ``result`` of each finished task in the state history). A node that
finished in parallel with the failed one counts as completed. The A2A executor calls it
when a served flow fails: the outputs become artifacts named after their nodes, then the
failed answer carries ``data.node`` and ``data.flow.completedNodes``.
"""

from __future__ import annotations

from typing import Any

from llamon_agent.core.flow_context import FlowContext
from llamon_agent.flow.builder import DEFAULT_NODE_KIND, node_kinds

__all__ = ["extract_flow_error_context"]

_INTERNAL_NODES = frozenset({"__start__", "__end__"})


async def extract_flow_error_context(graph: Any, thread_id: str) -> FlowContext | None:
    """The failure context of the run on ``thread_id``, or None if nothing is recorded.

    Raises whatever the checkpointer raises; the executor logs it and answers without
    flow context.
    """
    if getattr(graph, "checkpointer", None) is None:
        return None
    config = {"configurable": {"thread_id": thread_id}}
    state = await graph.aget_state(config)
    failed = next((task.name for task in state.tasks if task.error), None)
    if failed is None and state.next:
        failed = state.next[0]
    snapshots = [snapshot async for snapshot in graph.aget_state_history(config)]
    completed: list[str] = []
    outputs: dict[str, Any] = {}
    for snapshot in reversed(snapshots):  # oldest first: the order nodes finished in
        for task in snapshot.tasks:
            if task.name in _INTERNAL_NODES or task.error or task.result is None:
                continue
            if task.name not in outputs:
                completed.append(task.name)
            outputs[task.name] = task.result
    if failed is None and not completed:
        return None
    kinds = node_kinds(graph)
    return FlowContext(
        node_id=failed,
        node_kind=kinds.get(failed, DEFAULT_NODE_KIND) if failed else None,
        completed_nodes=tuple(completed),
        outputs=outputs,
    )
