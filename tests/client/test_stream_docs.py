"""docs/client-stream.md: every block compiles, and its examples run as told on loopback."""

from __future__ import annotations

import ast
import re
from collections.abc import AsyncIterator
from pathlib import Path
from types import CodeType
from typing import Any

from a2a.types import TaskArtifactUpdateEvent, TaskState

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import clear_card_cache
from tests._support.a2a_server import a2a_client, make_card, running_server, stream, user_message
from tests._support.parts import texts_of

DOC = (Path(__file__).parents[2] / "docs" / "client-stream.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)


def _run(marker: str) -> dict[str, Any]:
    (block,) = [b for b in BLOCKS if marker in b]
    code: CodeType = compile(
        block, "client-stream.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 -- our own documentation
    return namespace


class Poet:
    """Streams a haiku in three chunks."""

    async def invoke(self, ctx: AgentContext) -> str:
        return "rain on the roof"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
        for line in ("rain on the roof / ", "the gutter hums / ", "tea goes cold"):
            yield line


def test_every_block_compiles() -> None:
    assert len(BLOCKS) == 3
    for block in BLOCKS:
        compile(block, "client-stream.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


async def test_following_the_answer_returns_the_whole_text() -> None:
    clear_card_cache()
    follow = _run("follow_the_answer")["follow_the_answer"]
    async with running_server(create_app(Poet(), make_card())) as url:
        assert await follow(url) == "rain on the roof / the gutter hums / tea goes cold"


async def test_the_flow_streams_the_other_agents_chunks_to_its_caller() -> None:
    clear_card_cache()
    writing_flow = _run("writing_flow")["writing_flow"]
    async with running_server(create_app(Poet(), make_card())) as poet:
        app = create_app(writing_flow(poet), make_card())
        async with running_server(app) as url, a2a_client(url, streaming=True) as caller:
            events = await stream(caller, user_message("a haiku, please"))
    chunks = [
        text
        for _, update in events
        if isinstance(update, TaskArtifactUpdateEvent) and not update.last_chunk
        for text in texts_of(update.artifact.parts)
    ]
    assert chunks == ["rain on the roof / ", "the gutter hums / ", "tea goes cold"]
    final_task = events[-1][0]
    assert final_task.status.state == TaskState.completed


def test_the_key_table_example_holds() -> None:
    _run("Summarize the meeting")
