"""docs/auth-and-push.md says what the code does: the auth example runs, ``create_app``
refuses a config the card does not declare, and ``llamon serve --api-key`` enforces the
scheme and header of its ``--card``."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from llamon_agent.a2a import AuthConfig, AuthSpec, build_agent_card, create_app, skill
from tests._support.a2a_server import running_server

DOC = (Path(__file__).parents[2] / "docs" / "auth-and-push.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)
READY_TIMEOUT = 30.0
SEND = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "message/send",
    "params": {
        "message": {
            "role": "user",
            "parts": [{"kind": "text", "text": "hi"}],
            "messageId": "m-1",
            "kind": "message",
        }
    },
}


async def echo(ctx: Any) -> str:
    return "hello"


def _card(auth: AuthSpec | None) -> Any:
    return build_agent_card(
        name="billing-agent",
        description="Answers questions about one customer's invoices and payment status.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        skills=[skill("invoice", "Invoice lookup", "Finds one invoice by number.", tags=["b"])],
        auth=auth,
    )


async def test_the_auth_example_serves_with_the_key_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BILLING_AGENT_KEY", "k-docs-1")
    block = next(b for b in BLOCKS if "AuthConfig.from_card(card" in b)
    namespace: dict[str, Any] = {"agent": echo}
    exec(compile(block, "auth-and-push.md", "exec"), namespace)  # noqa: S102 -- our own docs
    async with running_server(namespace["app"]) as url, httpx.AsyncClient() as http:
        refused = await http.post(url + "/", json=SEND)
        answered = await http.post(url + "/", json=SEND, headers={"X-API-Key": "k-docs-1"})
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == -32040
    assert answered.json()["result"]["status"]["state"] == "completed"


def test_create_app_refuses_a_config_the_card_does_not_declare() -> None:
    with pytest.raises(ValueError, match="card declares api_key in 'X-Agent-Key'"):
        create_app(echo, _card(AuthSpec.api_key("X-Agent-Key")), auth=AuthConfig.api_key("k"))
    with pytest.raises(ValueError, match="requires api_key auth"):
        create_app(echo, _card(AuthSpec.api_key("X-Agent-Key")))
    with pytest.raises(ValueError, match="declares no security scheme"):
        create_app(echo, _card(None), auth=AuthConfig.bearer("t"))


async def test_llamon_serve_api_key_enforces_the_cards_header(tmp_path: Path) -> None:
    card = tmp_path / "card.json"
    card.write_text(
        _card(AuthSpec.api_key("X-Agent-Key")).model_dump_json(by_alias=True, exclude_none=True),
        encoding="utf-8",
    )
    agent = tmp_path / "echo_agent.py"
    agent.write_text("async def agent(ctx):\n    return 'hello'\n", encoding="utf-8")
    env = {**os.environ, "LLAMON_HOME": str(tmp_path), "LLAMON_API_KEY": "k-docs-2"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "llamon_agent",
        "serve",
        f"{agent}:agent",
        "--card",
        str(card),
        "--port",
        "0",
        "--store",
        "memory",
        env=env,
        stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
    )
    assert process.stderr is not None
    try:
        url = ""
        while not url:
            line = (await asyncio.wait_for(process.stderr.readline(), READY_TIMEOUT)).decode()
            assert line, "llamon serve exited before it was ready"
            if line.startswith("llamon: serving"):
                url = line.split(" at ", 1)[1].split(" ", 1)[0]
        async with httpx.AsyncClient() as http:
            default_header = await http.post(url, json=SEND, headers={"X-API-Key": "k-docs-2"})
            cards_header = await http.post(url, json=SEND, headers={"X-Agent-Key": "k-docs-2"})
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 20)
    assert default_header.status_code == 401
    assert default_header.json()["error"]["data"]["errorReason"] == "credentials_required"
    assert cards_header.json()["result"]["status"]["state"] == "completed"
