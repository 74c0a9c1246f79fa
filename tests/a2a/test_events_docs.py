"""docs/operations.md, "Events": every block runs as told (the kept-events example prints
what a real served flow's store kept), and the type table is complete."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from types import CodeType
from typing import Any

import httpx
import pytest

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.card import AuthSpec, build_agent_card, skill
from llamon_agent.a2a.server import create_app
from llamon_agent.core.events import EventBus
from llamon_agent.exceptions import ComponentInvokeError
from tests._support.a2a_server import make_card, running_server
from tests._support.jsonrpc import post, request, text_message

ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
SECTION = DOC.split("## Events", 1)[1].split("\n## ", 1)[0]
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION, flags=re.DOTALL)
KEY = "ops-key-6b1f0d9e2c4a8735"


def _run(marker: str) -> dict[str, Any]:
    (block,) = [b for b in BLOCKS if marker in b]
    code: CodeType = compile(block, "operations.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 -- our own documentation
    return namespace


def test_every_block_compiles() -> None:
    assert len(BLOCKS) == 4
    for block in BLOCKS:
        compile(block, "operations.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


async def agent(ctx: AgentContext) -> str:
    if ctx.text == "fail":
        raise ComponentInvokeError("billing is down")
    return f"echo {ctx.text}"


async def _send(http: httpx.AsyncClient, url: str, text: str) -> dict[str, Any]:
    reply = await post(http, url, request("message/send", {"message": text_message(text)}))
    task: dict[str, Any] = reply["result"]
    return task


async def test_the_subscribing_example_keeps_failures_and_writes_json_lines(
    tmp_path: Path,
) -> None:
    namespace = _run("app_with_events")
    log = tmp_path / "events.jsonl"
    app = namespace["app_with_events"](agent, make_card(), str(log))
    bus: EventBus = app.state.llamon_executor.events
    async with running_server(app) as url, httpx.AsyncClient(timeout=10) as http:
        failed = await _send(http, url, "fail")
        assert (await _send(http, url, "next"))["status"]["state"] == "completed"
        assert await bus.flush()
    [event] = namespace["failures"]
    assert (event.task_id, event.trace_metadata["failure_reason"]) == (
        failed["id"],
        "component_invoke_error",
    )
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [row["type"] for row in rows] == [
        "task.submitted",
        "task.working",
        "task.failed",
        "task.submitted",
        "task.working",
        "task.completed",
    ]


async def test_the_sse_example_follows_a_task_with_the_agents_key() -> None:
    follow_task = _run("follow_task")["follow_task"]
    card = build_agent_card(
        name="ops-agent",
        description="Answers test questions for the operations docs.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        skills=[skill("echo", "Echo", "Echoes one test question.", tags=["test"])],
        auth=AuthSpec.api_key(),
    )
    app = create_app(agent, card, auth=AuthConfig.from_card(card, KEY), events=EventBus())
    async with running_server(app) as url:
        async with httpx.AsyncClient(headers={"X-API-Key": KEY}, timeout=10) as http:
            task = await _send(http, url, "hello")
        events = await follow_task(url, task["id"], KEY)
    assert [e["type"] for e in events] == ["task.submitted", "task.working", "task.completed"]


async def test_the_kept_events_example_prints_a_served_flows_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.e2e.test_task_events_cli import _serve_flow

    task = await _serve_flow(None, tmp_path)
    capsys.readouterr()
    await _run("async def print_events")["print_events"](tmp_path, task.id)
    assert capsys.readouterr().out.splitlines() == [
        "task.submitted -",
        "task.working -",
        "node.started fetch_subject",
        "node.completed fetch_subject",
        "node.started rag_search",
        "node.failed rag_search",
        "task.failed rag_search",
    ]


def test_the_forwarding_example_runs() -> None:
    namespace = _run("RunnerEvent.from_dict")
    assert namespace["event"].task_id == "t-42"


def test_the_type_table_names_every_event_the_package_emits() -> None:
    documented = set(re.findall(r"^\| `([a-z]+\.[a-z_.-]+)`", SECTION, flags=re.MULTILINE))
    documented |= set(re.findall(r"`(task\.[a-z-]+)`", SECTION))
    source = "\n".join(path.read_text(encoding="utf-8") for path in (ROOT / "src").rglob("*.py"))
    emitted = set(re.findall(r'(?:emit|_event)\(\s*"([a-z]+\.[a-z_-]+)"', source))
    emitted |= {
        f"task.{state}" for state in ("submitted", "working", "completed", "failed", "canceled")
    }
    emitted |= {"task.input-required", "task.auth-required"}
    assert emitted - documented == set()
