"""docs/models.md: every Python block compiles, and its retry figures match the code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from llamon_agent.loop.providers import _retry

DOC = (Path(__file__).parents[3] / "docs" / "models.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)


def test_every_block_compiles() -> None:
    assert len(BLOCKS) >= 4
    for block in BLOCKS:
        compile(block, "models.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_retry_figures_match_the_code() -> None:
    assert f"0.5 s · 2ⁿ` (capped at {_retry.DEFAULT_MAX_WAIT:g} s)" in DOC
    assert _retry.DEFAULT_INITIAL_WAIT == 0.5
    assert f"up to {_retry.DEFAULT_JITTER:g} s of random jitter" in DOC
    assert f"above {_retry.DEFAULT_MAX_RETRY_AFTER:g} s is not waited out" in DOC
