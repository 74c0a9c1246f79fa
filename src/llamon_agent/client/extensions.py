"""The A2A card extensions llamon agents declare, for clients that read them."""

from __future__ import annotations

from typing import Final

__all__ = ["IDEMPOTENT_SEND_EXTENSION"]

IDEMPOTENT_SEND_EXTENSION: Final = "urn:llamon-agent:a2a:idempotent-send:v1"
"""The card extension (``capabilities.extensions[].uri``) of an agent that answers a
repeated ``messageId`` with the task it started (within ``params.windowSeconds``) or
continued (a retried answer to ``input-required``) instead of running again; a llamon
server declares it while its idempotency window is above 0. Only to such an agent does
``AgentClient`` send a message that continues a task again after a timeout, or send a
message again to learn the id of a task it must cancel."""
