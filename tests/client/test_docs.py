"""docs/client.md: every block compiles, and its examples run as told on loopback."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import CodeType
from typing import Any

from a2a.types import TaskState

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import RetryKind, RetryPolicy, clear_card_cache
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import raise_application_error
from llamon_agent.core.hitl import HITLInterrupt
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    user_message,
)

DOC = (Path(__file__).parents[2] / "docs" / "client.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)


def _run(marker: str) -> dict[str, Any]:
    (block,) = [b for b in BLOCKS if marker in b]
    code: CodeType = compile(block, "client.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 -- our own documentation
    return namespace


def test_every_block_compiles() -> None:
    assert len(BLOCKS) >= 2
    for block in BLOCKS:
        compile(block, "client.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


async def birthday(ctx: AgentContext) -> str | HITLInterrupt:
    if ctx.text == "busy":
        raise_application_error(
            ErrorCode.RATE_LIMITED, "busy", message="busy", retriable=True, retryAfterMs=500
        )
    if not ctx.resumed:
        return HITLInterrupt(payload={"question": "Your birthday?"})
    return f"born on {ctx.text}"


async def test_the_full_example_answers_the_question() -> None:
    clear_card_cache()
    ask = _run("ask_for_a_birthday")["ask_for_a_birthday"]
    async with running_server(create_app(birthday, make_card())) as url:
        assert await ask(url) == "born on 1990-01-01"


async def test_the_forwarding_example_passes_a_failure_through() -> None:
    clear_card_cache()
    forwarding_agent = _run("forwarding_agent")["forwarding_agent"]
    async with running_server(create_app(birthday, make_card())) as downstream:
        app = create_app(forwarding_agent(downstream), make_card())
        async with running_server(app) as url, a2a_client(url) as caller:
            task = await send(caller, user_message("busy"))
    assert task.status.state == TaskState.failed
    data = error_data(task)
    assert (data["errorCode"], data["errorReason"], data["retryAfterMs"]) == (
        "RATE_LIMITED",
        "busy",
        500,
    )


_KIND_WORDS = {
    RetryKind.BACKOFF: "backoff",
    RetryKind.RETRY_AFTER: "waits `retryAfterMs`",
    RetryKind.REFRESH: "refreshes the credential once",
    RetryKind.IF_IDEMPOTENT: "only when the call is idempotent",
    RetryKind.NEVER: "no retry",
}


def test_the_retry_table_says_what_the_default_policy_does() -> None:
    section = DOC.split("## Retry by failure kind", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    policy = RetryPolicy()
    for code in ErrorCode:
        (row,) = [r for r in rows if f"`{code.value}`" in r.split("|")[1] and "403" not in r]
        assert _KIND_WORDS[policy.kinds[code]] in row, (code, row)
    (forbidden,) = [r for r in rows if "403" in r]
    assert "no retry" in forbidden
    assert policy.no_retry_statuses == frozenset({403})
