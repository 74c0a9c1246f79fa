"""Read an A2A part as the kind a test expects; a part of another kind fails the test.

``Part.root`` is ``TextPart | FilePart | DataPart``; these helpers narrow it with an
``isinstance`` assertion, so a test that reads ``.text`` also checks the part is text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from a2a.types import Artifact, DataPart, Message, Part, TextPart

__all__ = ["artifacts_of", "data_of", "message_of", "text_of", "texts_of"]


def text_of(part: Part) -> str:
    """The text of a part that must be a TextPart."""
    root = part.root
    assert isinstance(root, TextPart), root
    return root.text


def data_of(part: Part) -> dict[str, Any]:
    """The data of a part that must be a DataPart."""
    root = part.root
    assert isinstance(root, DataPart), root
    return root.data


def texts_of(parts: Iterable[Part]) -> list[str]:
    """The texts of parts that must all be TextParts, in order."""
    return [text_of(part) for part in parts]


def message_of(message: Message | None) -> Message:
    """A status message that must be present."""
    assert message is not None
    return message


def artifacts_of(artifacts: list[Artifact] | None) -> list[Artifact]:
    """A task's artifacts, which must be present."""
    assert artifacts is not None
    return artifacts
