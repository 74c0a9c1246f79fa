"""docs/flows.md: the state and human-in-the-loop examples run as written; every block
compiles."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import CodeType
from typing import Any

DOC = (Path(__file__).parents[2] / "docs" / "flows.md").read_text(encoding="utf-8")
BLOCKS: list[str] = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)


def _compile(block: str) -> CodeType:
    code: CodeType = compile(block, "flows.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return code


async def _run(block: str, namespace: dict[str, Any]) -> None:
    result = eval(_compile(block), namespace)  # noqa: S307 -- our own documentation
    if result is not None:
        await result


def _block(marker: str) -> str:
    return next(block for block in BLOCKS if marker in block)


async def test_the_state_example_runs() -> None:
    namespace: dict[str, Any] = {}
    await _run(_block("def node_b(state)"), namespace)
    assert namespace["final"] == {"query": "go", "x": 1, "y": 2}


async def test_the_human_in_the_loop_example_runs() -> None:
    namespace: dict[str, Any] = {}
    await _run(_block("async def ask_birthday(state)"), namespace)
    await _run(_block("Command(resume="), namespace)
    assert namespace["done"]["birthday"] == "1990-01-01"


def test_every_block_compiles() -> None:
    assert len(BLOCKS) >= 4
    for block in BLOCKS:
        _compile(block)
