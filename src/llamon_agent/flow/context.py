"""Where a failed flow stopped: read back from its checkpoints, never from exception text.

``extract_flow_error_context(graph, thread_id)`` returns the failed node's id (from the
state's ``next``) and kind, the completed nodes in the order they finished, and their
outputs (the ``result`` of each finished task in the state history). A node that
finished in parallel with the failed one counts as completed. A flow compiled by
``GraphBuilder`` keeps that record in its checkpoints, so the answer costs two reads of
the latest checkpoint however long the run was; any other graph, or a thread begun
before the record was kept, has its history walked (time grows with the run). The A2A
executor calls it when a served flow fails: the outputs become artifacts named after their
nodes, then the failed answer carries ``data.node`` and ``data.flow.completedNodes``.
"""

from __future__ import annotations

from typing import Any

from llamon_agent.core.flow_context import FlowContext
from llamon_agent.flow.builder import COMPLETED_CHANNEL, DEFAULT_NODE_KIND, node_kinds

__all__ = ["extract_flow_error_context"]

_INTERNAL_NODES = frozenset({"__start__", "__end__"})
_FIRST_STEP = 0  # the step of the task that takes a new thread's first input


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
    completed: list[str] = []
    outputs: dict[str, Any] = {}
    recorded = await _recorded_outputs(graph, state)
    if recorded is not None:
        outputs.update(recorded)
        completed.extend(recorded)
        _add_finished(state.tasks, completed, outputs)  # the failed step's own successes
    else:
        snapshots = [snapshot async for snapshot in graph.aget_state_history(config)]
        for snapshot in reversed(snapshots):  # oldest first: the order nodes finished in
            _add_finished(snapshot.tasks, completed, outputs)
    if failed is None and not completed:
        return None
    kinds = node_kinds(graph)
    return FlowContext(
        node_id=failed,
        node_kind=kinds.get(failed, DEFAULT_NODE_KIND) if failed else None,
        completed_nodes=tuple(completed),
        outputs=outputs,
    )


def _add_finished(tasks: Any, completed: list[str], outputs: dict[str, Any]) -> None:
    """Add the tasks that finished with a result (a node first seen goes last)."""
    for task in tasks:
        if task.name in _INTERNAL_NODES or task.error or task.result is None:
            continue
        if task.name not in outputs:
            completed.append(task.name)
        outputs[task.name] = task.result


async def _recorded_outputs(graph: Any, state: Any) -> dict[str, Any] | None:
    """The outputs of the steps before ``state``, as ``GraphBuilder`` recorded them in
    the checkpoint, in the order the nodes first finished; None if the checkpoint has no
    record covering the whole thread."""
    channels = getattr(graph, "channels", None)
    if not isinstance(channels, dict) or COMPLETED_CHANNEL not in channels:
        return None
    read_checkpoint = getattr(graph.checkpointer, "aget_tuple", None)
    if read_checkpoint is None:
        return None
    saved = await read_checkpoint(state.config)
    if saved is None:
        return None
    record = saved.checkpoint.get("channel_values", {}).get(COMPLETED_CHANNEL)
    if not isinstance(record, dict) or record.get("since") != _FIRST_STEP:
        return None
    outputs = record.get("outputs")
    return dict(outputs) if isinstance(outputs, dict) else None
