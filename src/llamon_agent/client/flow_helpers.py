"""Calling another agent from a flow node: ``build_agent_context`` and ``call_agent_stream``.

Inside a ``GraphBuilder`` node::

    async def stream_response(state, *, agent_url):
        writer = get_stream_writer()
        full = ""
        async for chunk in call_agent_stream(agent_url, build_agent_context(state)):
            writer(chunk)
            full += chunk
        return {"output": full}

``build_agent_context(state)`` decides what of the flow's state the called agent sees:

=====================================  =================================================
state key                              sent as
=====================================  =================================================
``query`` (a str), else ``input``      the message's TextPart
(a str), else the last entry of
``messages`` (its ``content`` text)
``context_id`` (a str)                 the message's ``contextId`` (continue a
                                       conversation with the called agent)
the keys named in ``data_keys=``       one DataPart ``{key: value, ...}``
the keys named in ``metadata_keys=``   the message's ``metadata``
anything else                          nothing
=====================================  =================================================

Never sent, even when named: ``thread_id`` (the flow's own task id), keys starting with
``_`` (LangGraph and llamon internals such as ``__interrupt__``) or ``llamon``, keys that
look like credentials (their name contains ``password``, ``secret`` or ``token``, or has
a word ``auth``, ``authorization``, ``credential(s)``, ``cookie``, ``session``, ``passwd``,
``pwd``, ``apikey``, ``api_key``, ``private_key`` or ``access_key``, in snake_case or
camelCase; a named one raises ``ValueError``, one nested inside a sent value is left
out), and values that are not JSON (objects, bytes, NaN: a
``ValueError`` naming the key, never the value).
"""

from __future__ import annotations

import itertools
import math
import re
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from a2a.types import DataPart, Message, Part, Role, TextPart

from llamon_agent.client.auth import Credential
from llamon_agent.client.retry import RetryPolicy
from llamon_agent.client.stream import ArtifactChunk

__all__ = ["AgentCallContext", "build_agent_context", "call_agent_stream"]

_TEXT_KEYS: Final = ("query", "input")
_SECRET_WORDS: Final = frozenset(
    {"auth", "authorization", "cookie", "credential", "credentials", "passwd", "pwd"}
    | {"session", "apikey", "privatekey"}
)
_SECRET_PAIRS: Final = frozenset({("api", "key"), ("private", "key"), ("access", "key")})
_SECRET_INSIDE: Final = ("password", "secret", "token")
_WORDS: Final = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def _never_sent(key: str) -> str | None:
    """Why ``key`` is never sent, or None."""
    lowered = key.lower()
    if key == "thread_id" or key.startswith("_") or lowered.startswith("llamon"):
        return "an internal key"
    words = [word.lower() for word in _WORDS.findall(key)]
    if (
        any(word in _SECRET_WORDS for word in words)
        or any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words))
        or any(inside in lowered for inside in _SECRET_INSIDE)
    ):
        return "it looks like a credential"
    return None


@dataclass(frozen=True, slots=True)
class AgentCallContext:
    """What a flow sends to another agent: ``text`` (a TextPart when not empty), ``data``
    (one DataPart when not empty), ``metadata`` (the message's) and ``context_id``."""

    text: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)
    context_id: str | None = None

    def to_message(self, message_id: str | None = None) -> Message:
        """The A2A message (a new ``messageId`` unless given)."""
        parts: list[Part] = []
        if self.text:
            parts.append(Part(root=TextPart(text=self.text)))
        if self.data:
            parts.append(Part(root=DataPart(data=dict(self.data))))
        return Message(
            role=Role.user,
            parts=parts,
            message_id=message_id or uuid.uuid4().hex,
            context_id=self.context_id,
            metadata=dict(self.metadata) or None,
        )


def _json(value: Any, path: str) -> Any:
    """``value`` as plain JSON, credential-looking keys left out; ``ValueError`` naming
    ``path`` (never the value) for anything that is not JSON."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"state key {path!r} is not JSON (a non-finite float)")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"state key {path!r} is not JSON (a non-string key)")
            if _never_sent(key) is None:
                out[key] = _json(item, f"{path}.{key}")
        return out
    if isinstance(value, list | tuple):
        return [_json(item, f"{path}[{index}]") for index, item in enumerate(value)]
    raise ValueError(f"state key {path!r} is not JSON (a {type(value).__name__})")


def _last_message_text(messages: Any) -> str:
    if not isinstance(messages, list | tuple) or not messages:
        return ""
    last = messages[-1]
    content = last.get("content") if isinstance(last, Mapping) else getattr(last, "content", None)
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks: the text ones
        return "".join(
            block.get("text", "")
            for block in content
            if isinstance(block, Mapping) and isinstance(block.get("text"), str)
        )
    return ""


def _picked(state: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    picked: dict[str, Any] = {}
    for key in keys:
        why = _never_sent(key)
        if why is not None:
            raise ValueError(f"state key {key!r} is never sent to another agent: {why}")
        if key in state:
            picked[key] = _json(state[key], key)
    return picked


def build_agent_context(
    state: Mapping[str, Any],
    *,
    data_keys: Iterable[str] = (),
    metadata_keys: Iterable[str] = (),
) -> AgentCallContext:
    """What a flow sends to another agent from its ``state`` (see the module docstring's
    table: the text, the context id, the named data and metadata keys; nothing else)."""
    text = next((state[k] for k in _TEXT_KEYS if isinstance(state.get(k), str)), None)
    if text is None:
        text = _last_message_text(state.get("messages"))
    context_id = state.get("context_id")
    return AgentCallContext(
        text=text,
        data=_picked(state, data_keys),
        metadata=_picked(state, metadata_keys),
        context_id=context_id if isinstance(context_id, str) and context_id else None,
    )


async def call_agent_stream(
    agent_url: str,
    context: AgentCallContext | Message | str,
    *,
    auth: Credential | None = None,
    skill: str | None = None,
    retry: RetryPolicy | None = None,
    timeout: float = 30.0,  # noqa: ASYNC109 -- each HTTP request's, as AgentClient's
) -> AsyncIterator[str]:
    """The text of what the agent at ``agent_url`` streams, chunk by chunk (each once,
    also across a dropped connection: ``AgentClient.stream``).

    Ends when the agent's task completes -- or pauses for input (its question is not a
    chunk; use ``AgentClient.stream`` to read it). A failed task raises the
    ``RemoteAgentError`` family after the chunks before it (raised in a flow node, the
    flow's caller receives its ``errorCode``); a card that does not stream raises
    ``CardMismatchError``. The client it opens is closed when the iteration ends, fails
    or is closed.
    """
    from llamon_agent.client.agent_client import AgentClient

    message = context.to_message() if isinstance(context, AgentCallContext) else context
    async with AgentClient(agent_url, auth=auth, timeout=timeout) as client:
        events = client.stream(message, skill=skill, retry=retry)
        try:
            async for event in events:
                if isinstance(event, ArtifactChunk) and event.text:
                    yield event.text
        finally:
            await events.aclose()
