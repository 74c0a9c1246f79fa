"""docs/a2a-server.md: every block compiles, and the streaming example streams as told."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import CodeType
from typing import Any

from a2a.types import DataPart, TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent, TextPart

from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import a2a_client, make_card, running_server, stream, user_message
from tests._support.parts import message_of, texts_of

DOC = (Path(__file__).parents[2] / "docs" / "a2a-server.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)


def _compile(block: str) -> CodeType:
    code: CodeType = compile(block, "a2a-server.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return code


def test_every_block_compiles() -> None:
    assert len(BLOCKS) >= 3
    for block in BLOCKS:
        _compile(block)


async def test_the_guardrail_hold_back_example_streams_only_checked_text() -> None:
    (block,) = [b for b in BLOCKS if "class CarefulAgent" in b]
    namespace: dict[str, Any] = {}
    exec(_compile(block), namespace)  # noqa: S102 -- our own documentation
    app = create_app(namespace["CarefulAgent"](), make_card())
    async with running_server(app) as url, a2a_client(url, streaming=True) as client:
        events = await stream(client, user_message("Who wrote the first program?"))
    updates = [update for _, update in events if update is not None]
    progress = [u for u in updates if isinstance(u, TaskStatusUpdateEvent) and u.status.message]
    assert [text for u in progress for text in texts_of(message_of(u.status.message).parts)] == [
        "Searching 3 sources…"
    ]
    chunks = [
        (u.append, u.last_chunk, texts_of(u.artifact.parts))
        for u in updates
        if isinstance(u, TaskArtifactUpdateEvent)
    ]
    assert chunks == [
        (False, False, ["Ada Lovelace "]),
        (True, False, ["wrote the first program."]),
        (False, True, ["Ada Lovelace ", "wrote the first program."]),
    ]
    final = updates[-1]
    assert isinstance(final, TaskStatusUpdateEvent)
    assert final.final
    assert final.status.state == TaskState.completed


async def test_the_guardrail_hold_back_example_never_sends_blocked_text() -> None:
    (block,) = [b for b in BLOCKS if "class CarefulAgent" in b]
    namespace: dict[str, Any] = {}
    exec(_compile(block), namespace)  # noqa: S102 -- our own documentation
    namespace["passes_guardrail"] = lambda text: "program" not in text
    app = create_app(namespace["CarefulAgent"](), make_card())
    async with running_server(app) as url, a2a_client(url, streaming=True) as client:
        events = await stream(client, user_message("Who wrote the first program?"))
    updates = [update for _, update in events if update is not None]
    sent = [
        p.root.text
        for u in updates
        if isinstance(u, TaskArtifactUpdateEvent)
        for p in u.artifact.parts
        if isinstance(p.root, TextPart)
    ]
    assert sent == ["Ada Lovelace "]  # checked and released; the blocked sentence never
    final = updates[-1]
    assert isinstance(final, TaskStatusUpdateEvent)
    assert final.final
    assert final.status.state == TaskState.failed
    assert final.status.message is not None
    data = [p.root.data for p in final.status.message.parts if isinstance(p.root, DataPart)]
    assert data[0]["errorCode"] == "GUARDRAIL_BLOCKED"
