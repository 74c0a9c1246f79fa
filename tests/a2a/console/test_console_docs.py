"""docs/operations.md, "The web console": the python block builds an app whose console
lets the operator in and refuses the other named caller, as the text says."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import httpx

from tests._support.a2a_server import running_server
from tests._support.console import ConsoleTestAgent

DOC = (Path(__file__).parents[3] / "docs" / "operations.md").read_text(encoding="utf-8")
SECTION = DOC.split("## The web console", 1)[1].split("\n## ", 1)[0]
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION, flags=re.DOTALL)


def test_the_section_has_one_block_and_it_compiles() -> None:
    assert len(BLOCKS) == 1
    compile(BLOCKS[0], "operations.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


async def test_only_the_operator_gets_in() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(BLOCKS[0], "operations.md", "exec"), namespace)  # noqa: S102 -- our own docs
    app = namespace["app_with_console"](ConsoleTestAgent(), "ops-key-9", "billing-key-9")
    async with running_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        signed = await client.post("/console/login", data={"credential": "ops-key-9"})
        assert signed.status_code == 303
        assert (await client.get("/console/failures")).status_code == 200
        client.cookies.clear()
        refused = await client.post("/console/login", data={"credential": "billing-key-9"})
        assert refused.status_code == 401
        assert "not accepted" in refused.text
        assert (
            await client.get("/console", headers={"X-API-Key": "billing-key-9"})
        ).status_code == 401
