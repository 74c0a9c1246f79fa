"""docs/operations.md, "Failures and tasks": every python block compiles, and the query
example prints what a real served agent's failures were."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_failures_cli import _served_failures

DOC = (Path(__file__).parents[3] / "docs" / "operations.md").read_text(encoding="utf-8")
SECTION = DOC.split("## Failures and tasks", 1)[1].split("\n## ", 1)[0]
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION, flags=re.DOTALL)


def _namespace(marker: str) -> dict[str, Any]:
    (block,) = [b for b in BLOCKS if marker in b]
    namespace: dict[str, Any] = {}
    exec(compile(block, "operations.md", "exec"), namespace)  # noqa: S102 -- our own docs
    return namespace


def test_every_block_compiles() -> None:
    assert len(BLOCKS) == 1
    for block in BLOCKS:
        compile(block, "operations.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


async def test_the_query_example_prints_the_served_agents_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = await _served_failures(tmp_path)
    capsys.readouterr()
    await _namespace("async def last_hour")["last_hour"](tmp_path)
    action = "check_timeout_paging_and_downstream_latency"
    assert capsys.readouterr().out.splitlines() == [
        f"{tasks['s2'].id} timeout search {action}",
        f"{tasks['s1'].id} timeout search {action}",
        "timeout 2",
        "runtime_error 1",
    ]
