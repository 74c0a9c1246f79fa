"""What a successful call to another agent returns: ``RemoteResult``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from a2a.types import Artifact, DataPart, Message, Part, Task, TaskState, TextPart

__all__ = ["RemoteResult"]

_PAUSED = frozenset({TaskState.input_required, TaskState.auth_required})


@dataclass(frozen=True, slots=True)
class RemoteResult:
    """The called agent's answer.

    ``state`` is the task's final (or paused) state; ``text`` joins every TextPart of the
    artifacts (or of the reply message when the agent answered with a message), ``data``
    lists their DataParts. ``needs_input`` is True when the agent paused for the caller
    (``input-required`` / ``auth-required``): ``question`` is its status message (text,
    or a DataPart's ``question``), and ``AgentClient.resume(result, answer)`` continues the
    same task. ``task_id`` / ``context_id`` are None only for a plain message reply.
    """

    state: TaskState
    task_id: str | None
    context_id: str | None
    artifacts: tuple[Artifact, ...] = ()
    text: str = ""
    data: tuple[dict[str, Any], ...] = ()
    needs_input: bool = False
    question: str | None = None
    task: Task | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_task(cls, task: Task) -> RemoteResult:
        """The result of a task the called agent answered with."""
        artifacts = tuple(task.artifacts or ())
        parts = [part for artifact in artifacts for part in artifact.parts]
        paused = task.status.state in _PAUSED
        return cls(
            state=task.status.state,
            task_id=task.id,
            context_id=task.context_id,
            artifacts=artifacts,
            text=_text(parts),
            data=_data(parts),
            needs_input=paused,
            question=_question(task.status.message) if paused else None,
            task=task,
        )

    @classmethod
    def from_message(cls, message: Message) -> RemoteResult:
        """The result of a plain message reply (an agent that keeps no task)."""
        return cls(
            state=TaskState.completed,
            task_id=message.task_id,
            context_id=message.context_id,
            text=_text(message.parts),
            data=_data(message.parts),
        )


def _text(parts: Sequence[Part]) -> str:
    return "".join(p.root.text for p in parts if isinstance(p.root, TextPart))


def _data(parts: Sequence[Part]) -> tuple[dict[str, Any], ...]:
    return tuple(p.root.data for p in parts if isinstance(p.root, DataPart))


def _question(message: Message | None) -> str | None:
    if message is None:
        return None
    text = _text(message.parts)
    if text:
        return text
    for data in _data(message.parts):
        asked = data.get("question")
        if isinstance(asked, str):
            return asked
    return None
