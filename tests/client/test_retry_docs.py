"""docs/client-retry.md's AgentClient examples, run as told against llamon agents on
127.0.0.1 (every block also runs on its own in test_retry.py)."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from typing import Any

from a2a.types import TaskState

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import AgentClient, clear_card_cache
from llamon_agent.core.hitl import HITLInterrupt
from tests._support.a2a_server import make_card, running_server

DOC = (Path(__file__).parents[2] / "docs" / "client-retry.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)


def _defined(name: str) -> Any:
    (block,) = [b for b in BLOCKS if f"def {name}(" in b]
    code = compile(block, "client-retry.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 -- our own documentation
    return namespace[name]


class Writer:
    """Asks how long the first time; ``slow`` waits until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.task_ids: list[str] = []

    async def __call__(self, ctx: AgentContext) -> str | HITLInterrupt:
        if ctx.text == "slow":
            self.task_ids.append(ctx.task_id)
            self.started.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        if ctx.text == "long report" and not ctx.resumed:
            return HITLInterrupt(payload={"question": "How long?"})
        return f"summary ({ctx.text})"


async def test_the_summarize_example_answers_after_its_question() -> None:
    clear_card_cache()
    summarize = _defined("summarize")
    async with running_server(create_app(Writer(), make_card())) as url:
        assert await summarize(url, "long report") == "summary (keep it short)"


async def test_the_start_then_collect_example_waits_for_the_task() -> None:
    clear_card_cache()
    start_then_collect = _defined("start_then_collect")
    async with running_server(create_app(Writer(), make_card())) as url:
        assert await start_then_collect(url, "report") == "summary (report)"


async def test_the_answer_within_example_cancels_the_slow_task() -> None:
    clear_card_cache()
    answer_within = _defined("answer_within")
    writer = Writer()
    async with running_server(create_app(writer, make_card())) as url:
        assert await answer_within(url, "slow", 0.2) is None
        await asyncio.wait_for(writer.cancelled.wait(), 10)
        async with AgentClient(url) as client:
            (task_id,) = writer.task_ids
            assert (await client.get(task_id)).state is TaskState.canceled
        assert await answer_within(url, "quick", 10.0) == "summary (quick)"
