"""docs/tool-loop.md: its first example runs as written, and every block compiles."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import CodeType
from typing import Any

DOC = (Path(__file__).parents[2] / "docs" / "tool-loop.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)


def _compile(block: str) -> CodeType:
    code: CodeType = compile(block, "tool-loop.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return code


async def test_the_first_example_runs() -> None:
    namespace: dict[str, Any] = {}
    result = eval(_compile(BLOCKS[0]), namespace)  # noqa: S307 -- our own documentation
    if result is not None:
        await result
    assert namespace["outcome"].answer == "The sum is 5."


def test_every_block_compiles() -> None:
    assert len(BLOCKS) >= 4
    for block in BLOCKS:
        _compile(block)


async def test_the_fault_injection_example_runs() -> None:
    [block] = [b for b in BLOCKS if "fault_scope(plan)" in b]
    namespace: dict[str, Any] = {}
    result = eval(_compile(block), namespace)  # noqa: S307 -- our own documentation
    if result is not None:
        await result
    assert namespace["ordered"] == []
    assert namespace["outcome"].answer == "I would order Dune once the shop answers."
