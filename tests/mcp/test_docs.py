"""docs/mcp.md: the agent patterns answer ``failed`` when the loop fails, and the testing
example runs outside this repository."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import CodeType
from typing import Any

import pytest
from a2a.types import TaskState

from llamon_agent.a2a import create_app
from llamon_agent.examples.bookshop import build_server
from llamon_agent.loop import ScriptedModel, tool_call
from llamon_agent.mcp import MCPToolLoader
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    texts,
    user_message,
)

DOC = (Path(__file__).parents[2] / "docs" / "mcp.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)
AGENT_PATTERNS = [block for block in BLOCKS if "async def agent(ctx" in block]


def _compile(block: str) -> CodeType:
    code: CodeType = compile(block, "mcp.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return code


def test_every_block_compiles() -> None:
    assert len(AGENT_PATTERNS) == 2
    for block in BLOCKS:
        _compile(block)


@pytest.mark.parametrize("block", AGENT_PATTERNS)
async def test_an_agent_pattern_fails_the_task_when_the_bookshop_refuses(block: str) -> None:
    namespace: dict[str, Any] = {}
    exec(_compile(block), namespace)  # noqa: S102 -- our own documentation
    # the documented agent, against the bookshop started read-only (in process)
    namespace["bookshop"] = MCPToolLoader(build_server(read_only=True), tool_prefix="shop_")
    namespace["model"] = ScriptedModel([tool_call("shop_order_book", {"title": "Dune"}), "ok"])
    app = create_app(namespace["agent"], make_card())
    async with running_server(app) as url, a2a_client(url) as client:
        refused = await send(client, user_message("order Dune"))
        namespace["model"] = ScriptedModel([tool_call("shop_get_book", {"title": "Dune"}), "3"])
        answered = await send(client, user_message("how many copies of Dune?"))
    assert refused.status.state == TaskState.failed
    data = error_data(refused)
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "UPSTREAM_UNAVAILABLE",
        "mcp_error",
        False,
    )
    assert answered.status.state == TaskState.completed
    assert texts(answered) == ["3"]


def test_the_testing_example_runs_outside_the_repository(tmp_path: Path) -> None:
    block = next(b for b in BLOCKS if "async def test_a_wrong_title_is_an_observation" in b)
    script = tmp_path / "check_bookshop.py"
    script.write_text(
        block
        + textwrap.dedent(
            """
            import asyncio

            asyncio.run(test_a_wrong_title_is_an_observation())
            print("passed")
            """
        ),
        encoding="utf-8",
    )
    done = subprocess.run(  # noqa: S603 -- our own interpreter and script
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "passed"
