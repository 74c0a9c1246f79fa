"""docs/client-push.md: every block compiles, and its examples run as told on loopback
(a real llamon server that allows loopback webhooks, the receiver served by uvicorn)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import CodeType
from typing import Any

import httpx

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.push_policy import PushPolicy
from llamon_agent.a2a.server import create_app
from llamon_agent.client import PushReceiver, clear_card_cache
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import raise_application_error
from tests._support.a2a_server import make_card, running_server

DOC = (Path(__file__).parents[2] / "docs" / "client-push.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)
LOOPBACK = PushPolicy(allow=["127.0.0.1/32"])


def _run(marker: str) -> dict[str, Any]:
    (block,) = [b for b in BLOCKS if marker in b]
    code: CodeType = compile(block, "client-push.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 -- our own documentation
    return namespace


def test_every_block_compiles() -> None:
    assert len(BLOCKS) == 3
    for block in BLOCKS:
        compile(block, "client-push.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


async def reporter(ctx: AgentContext) -> str:
    if "broken" in ctx.text:
        raise_application_error(
            ErrorCode.UPSTREAM_UNAVAILABLE, "report_store_down", message="down", retriable=True
        )
    return f"summary of: {ctx.text}"


async def test_the_start_and_wait_example_gets_the_pushed_end() -> None:
    clear_card_cache()
    summarise = _run("async def summarise")["summarise"]
    app = create_app(reporter, make_card(push=True), push_policy=LOOPBACK)
    async with running_server(app) as url:
        assert await summarise(url) == "summary of: Summarise the quarterly report"


async def test_the_start_and_wait_example_reports_a_failure() -> None:
    clear_card_cache()
    namespace = _run("async def summarise")
    source = next(b for b in BLOCKS if "async def summarise" in b)
    broken = source.replace('"Summarise the quarterly report"', '"broken report"')
    exec(  # noqa: S102 -- our own documentation, the same example with another text
        compile(broken, "client-push.md", "exec"), namespace
    )
    app = create_app(reporter, make_card(push=True), push_policy=LOOPBACK)
    async with running_server(app) as url:
        assert await namespace["summarise"](url) == "failed: UPSTREAM_UNAVAILABLE report_store_down"


async def test_the_mounting_example_serves_the_endpoint_at_the_urls_path() -> None:
    namespace = _run("receiver.routes")
    receiver: PushReceiver = namespace["receiver"]
    assert receiver.path == "/a2a/push"
    for app in (namespace["app"], namespace["mine"]):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
            response = await client.post("/a2a/push", json={})
        assert (response.status_code, response.json()["error"]) == (401, "push_token_required")


async def test_the_signed_example_refuses_an_unsigned_post() -> None:
    receiver: PushReceiver = _run("jwks_url=")["receiver"]
    token = receiver.register("t1").token
    assert token is not None
    transport = httpx.ASGITransport(app=receiver.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
        response = await client.post(
            "/a2a/push", json={}, headers={"X-A2A-Notification-Token": token}
        )
    assert (response.status_code, response.json()["error"]) == (401, "push_signature_required")
