"""Human in the loop: ask the caller for input instead of failing.

``input-required`` and ``auth-required`` are not errors; they are normal flow control.
An agent or a flow node *returns* (never raises) a ``HITLInterrupt``; the A2A server
answers the task ``input-required`` (or ``auth-required``) with ``payload`` as a
DataPart, and the client's next message on the same task resumes the work::

    async def ask_birthday(state):
        if not state.get("birthday"):
            return HITLInterrupt(
                payload={"question": "생년월일을 알려주세요."},
                thread_id=state["thread_id"],
            )
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["DEFAULT_RESUME_KEY", "HITLInterrupt", "InterruptKind"]

InterruptKind = Literal["input-required", "auth-required"]

DEFAULT_RESUME_KEY = "answer"
"""Where a flow puts a text answer when neither ``resume_key`` nor the node's own
lookups name the key (see ``HITLInterrupt``)."""


@dataclass(frozen=True, slots=True)
class HITLInterrupt:
    """A pause for the caller: the task goes ``input-required`` (or ``auth-required``).

    ``payload`` is what the caller sees (a question, a form, an auth URL); ``thread_id``
    names the conversation/checkpoint thread to resume; ``kind`` picks the task state.
    In a flow, the caller's answer is merged into the state before the node runs again: a
    data answer as is, a text answer under ``resume_key``. Without ``resume_key`` a text
    answer goes under the one key the node looked up in its state and did not find
    before returning the interrupt (``state.get("birthday")`` -> ``"birthday"``), or under
    ``DEFAULT_RESUME_KEY`` (``"answer"``) when no key, or several, were missing.
    """

    payload: Mapping[str, Any] = field(default_factory=dict)
    thread_id: str | None = None
    kind: InterruptKind = "input-required"
    resume_key: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("input-required", "auth-required"):
            raise ValueError(
                f"HITLInterrupt.kind must be 'input-required' or 'auth-required', got {self.kind!r}"
            )
        if not isinstance(self.payload, Mapping):
            raise TypeError(
                f"HITLInterrupt.payload must be a mapping, got {type(self.payload).__name__}"
            )
        if self.resume_key is not None and not (
            isinstance(self.resume_key, str) and self.resume_key
        ):
            raise ValueError("HITLInterrupt.resume_key must be a non-empty string or None")
