"""``FlowContext``: where a flow was when it failed, as the failed answer reports it.

The flow layer fills it from a failed run's checkpoints (``flow.context``); the A2A
executor reads it to send the completed nodes' outputs as artifacts and to put
``data.node`` and ``data.flow.completedNodes`` in the failed answer. It lives here, below
both, so neither has to import the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FlowContext"]


@dataclass(frozen=True, slots=True)
class FlowContext:
    """Where a flow was when it failed (filled by the flow layer's context hook).

    ``node_id``/``node_kind`` name the failed node; ``completed_nodes`` are in order;
    ``outputs`` maps a completed node to its output, emitted as an artifact named after
    the node before the failed answer.
    """

    node_id: str | None = None
    node_kind: str | None = None
    completed_nodes: tuple[str, ...] = ()
    outputs: Mapping[str, Any] = field(default_factory=dict)
