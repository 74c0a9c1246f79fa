"""The A2A parts an agent's answers are published as: what a client reads on the wire.

Every value that reaches a caller as message or artifact content is turned into a2a
``Part`` objects here: a string is a ``TextPart``, a mapping a ``DataPart`` (its values
made JSON-safe, anything else as ``str``), a ``Part`` is kept as it is.
``application_error_to_parts(data)`` gives the parts of a failed task's status message: a
TextPart a client can show, then a DataPart holding the error data (``errorCode``,
``errorReason`` ...); the payload itself is built in ``llamon_agent.core.error_data``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from a2a.types import DataPart, Part, TextPart
from pydantic_core import to_jsonable_python

from llamon_agent.a2a.agent import Chunk, Completed
from llamon_agent.core.codes import DEFAULT_MESSAGES
from llamon_agent.core.error_data import BaseErrorData
from llamon_agent.core.hitl import HITLInterrupt
from llamon_agent.core.scrub import scrub_public_text

__all__ = [
    "application_error_to_parts",
    "chunk_to_part",
    "completed_parts",
    "data_part",
    "interrupt_parts",
    "output_to_parts",
    "progress_parts",
    "text_part",
]


def application_error_to_parts(data: BaseErrorData, display_text: str | None = None) -> list[Part]:
    """The parts of a failed status message: a TextPart to show, then a DataPart with ``data``.

    ``display_text`` (scrubbed) defaults to the error message, or a plain sentence for the
    code.
    """
    text = scrub_public_text(display_text) if display_text else data.error_message
    return [
        Part(root=TextPart(text=text or DEFAULT_MESSAGES[data.error_code])),
        Part(root=DataPart(data=data.to_wire())),
    ]


_DEFAULT_QUESTION = "More input is needed."
"""The text of a pause whose payload names no ``question`` (or ``message``)."""


def text_part(text: str) -> Part:
    """``text`` as a ``TextPart``."""
    return Part(root=TextPart(text=text))


def data_part(data: Mapping[str, Any]) -> Part:
    """``data`` as a ``DataPart``, its values made JSON-safe (anything else as ``str``)."""
    return Part(root=DataPart(data=to_jsonable_python(dict(data), fallback=str)))


def chunk_to_part(chunk: Chunk) -> Part:
    """One streamed chunk (``ctx.emit``): a ``Part`` as is, text, or a mapping as data."""
    if isinstance(chunk, Part):
        return chunk
    if isinstance(chunk, str):
        return text_part(chunk)
    return data_part(chunk)


def output_to_parts(value: Any) -> list[Part]:
    """An artifact's parts from an agent's output (or ``ctx.add_artifact`` value).

    A sequence of ``Part`` is kept; any other sequence becomes ``{"items": [...]}``; a
    string, ``Part`` or mapping is one part (``chunk_to_part``); anything else becomes
    ``{"value": ...}``.
    """
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        if all(isinstance(item, Part) for item in value):
            return list(value)
        return [Part(root=DataPart(data={"items": to_jsonable_python(value, fallback=str)}))]
    if isinstance(value, str | Part | Mapping):
        return [chunk_to_part(value)]
    return [Part(root=DataPart(data={"value": to_jsonable_python(value, fallback=str)}))]


def progress_parts(text: str, data: Mapping[str, Any] | None) -> list[Part]:
    """A ``ctx.progress`` message: its text, then its data when given."""
    parts = [text_part(text)]
    if data is not None:
        parts.append(data_part(data))
    return parts


def interrupt_parts(interrupt: HITLInterrupt) -> list[Part]:
    """A pause's status message: the question (the payload's ``question`` or ``message``,
    else "More input is needed."), then the whole payload as data."""
    question = interrupt.payload.get("question") or interrupt.payload.get("message")
    return [text_part(str(question or _DEFAULT_QUESTION)), data_part(interrupt.payload)]


def completed_parts(output: Completed) -> list[Part]:
    """The ``result`` artifact of a ``Completed`` answer: its text (if any), then its data."""
    parts = [data_part(output.data)]
    if output.text:
        parts.insert(0, text_part(output.text))
    return parts
