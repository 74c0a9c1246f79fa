"""A flow for ``llamon serve`` replicas in subprocesses (``tests._support.birthday_flow:agent``):
its one node asks for a birthday (input-required) and, once answered, completes with
``born ANSWER``. Served uncompiled, so the server gives it its checkpointer (with
``--store postgres``: checkpoints in the same database, seen by every replica)."""

from __future__ import annotations

from typing import Any

from llamon_agent import END, START, GraphBuilder
from llamon_agent.core.hitl import HITLInterrupt

__all__ = ["agent", "ask_birthday"]


def ask_birthday(state: dict[str, Any]) -> HITLInterrupt | dict[str, Any]:
    """Ask for the birthday until the state holds one; then the output."""
    birthday = state.get("birthday")
    if not birthday:
        return HITLInterrupt(
            payload={"question": "When is your birthday? (YYYY-MM-DD)"},
            thread_id=state["thread_id"],
            resume_key="birthday",
        )
    return {"output": f"born {birthday}"}


agent = (
    GraphBuilder()
    .node("ask_birthday", ask_birthday, node_kind="hitl")
    .edge(START, "ask_birthday")
    .edge("ask_birthday", END)
)
