"""The a2a ``Part``s a failed answer is made of: what a client reads on the wire.

``application_error_to_parts(data)`` gives the parts of a failed task's status message: a
TextPart a client can show, then a DataPart holding the error data (``errorCode``,
``errorReason`` ...). The payload itself is built in ``llamon_agent.core.error_data``;
only the wrapping in a2a types happens here, in the A2A layer.
"""

from __future__ import annotations

from a2a.types import DataPart, Part, TextPart

from llamon_agent.core.codes import DEFAULT_MESSAGES
from llamon_agent.core.error_data import BaseErrorData
from llamon_agent.core.scrub import scrub_public_text

__all__ = [
    "application_error_to_parts",
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
