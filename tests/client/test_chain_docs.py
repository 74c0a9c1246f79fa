"""docs/client-multi.md "Chaining agents": its example runs as told against three real
llamon agents on 127.0.0.1 and a shelf the test serves (a big text by reference, then a
failing middle step)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import CodeType
from typing import Any

import httpx
from a2a.types import FileWithUri

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import ArtifactShelf, clear_card_cache
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import raise_application_error
from tests._support.a2a_server import make_card, running_server

DOC = (Path(__file__).parents[2] / "docs" / "client-multi.md").read_text(encoding="utf-8")
SECTION = DOC[DOC.index("## Chaining agents") :]
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION, flags=re.DOTALL)


def _run(marker: str) -> dict[str, Any]:
    (block,) = [b for b in BLOCKS if marker in b]
    code: CodeType = compile(block, "client-multi.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 -- our own documentation
    return namespace


async def _text(ctx: AgentContext) -> str:
    """The caller's text, by value or fetched from the URI it was given by reference."""
    if not ctx.files:
        return ctx.text
    (part,) = ctx.files
    assert isinstance(part.file, FileWithUri)
    async with httpx.AsyncClient() as http:
        response = await http.get(part.file.uri)
    response.raise_for_status()
    return response.text


async def clean(ctx: AgentContext) -> str:
    return " ".join((await _text(ctx)).split())


async def translate(ctx: AgentContext) -> str:
    text = await _text(ctx)
    if text.startswith("klingon"):
        raise_application_error(ErrorCode.NOT_FOUND, "no_dictionary", message="no dictionary")
    return text.replace("hallo", "hello")


async def count(ctx: AgentContext) -> dict[str, int]:
    return {"words": len((await _text(ctx)).split())}


def test_the_shelf_block_mounts_a_shelf() -> None:
    shelf = _run("caller_app")["shelf"]
    assert isinstance(shelf, ArtifactShelf)
    assert (shelf.max_bytes, shelf.ttl) == (32 * 1024 * 1024, 120.0)


async def test_the_chain_example_counts_words_and_names_a_failing_step() -> None:
    clear_card_cache()
    word_count = _run("word_count")["word_count"]
    text_card = make_card(streaming=False).model_copy(
        update={"default_input_modes": ["text/plain"], "default_output_modes": ["text/plain"]}
    )
    data_card = text_card.model_copy(update={"default_output_modes": ["application/json"]})
    shelf = ArtifactShelf()
    big = "hallo  world " * 30_000  # 390 000 bytes: by reference after the first step
    async with (
        running_server(shelf.app()) as shelf_url,
        running_server(create_app(clean, text_card)) as a,
        running_server(create_app(translate, text_card)) as b,
        running_server(create_app(count, data_card)) as c,
    ):
        shelf.base_url = shelf_url
        counted = await word_count(big, [a, b, c], shelf)
        failed = await word_count("klingon  words", [a, b, c], shelf)
        following = await word_count("hallo there", [a, b, c], shelf)
    assert counted == "60000 words"
    assert failed == "step 2 failed (NOT_FOUND, no_dictionary); done: ['klingon words']"
    assert following == "2 words"
    assert len(shelf) == 0
