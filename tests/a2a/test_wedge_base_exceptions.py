"""An agent that raises a ``BaseException`` that is not an ``Exception`` fails its task.

A custom ``BaseException``, ``asyncio.CancelledError`` raised by the agent itself (no one
cancelled it), ``KeyboardInterrupt`` or ``SystemExit``: the task ends ``failed`` with
``INTERNAL_ERROR`` and an incident id, like any unmapped exception, and the server keeps
serving. Only a real signal stops ``llamon serve``.
"""

from __future__ import annotations

import asyncio
import signal
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from tests._support.a2a_server import make_card
from tests._support.serve import llamon_serve
from tests.a2a.test_wedge import (
    DEADLINE,
    assert_served,
    failure_data,
    get_task,
    rpc,
    serving,
    state_of,
)

pytestmark = pytest.mark.usefixtures("with_and_without_a_tracer_provider")


class AgentAborted(BaseException):
    """Not an ``Exception``: ``except Exception`` does not catch it."""


class Agent:
    async def invoke(self, ctx: AgentContext) -> str:
        if ctx.text == "custom":
            raise AgentAborted("stop everything")
        if ctx.text == "cancelled":
            raise asyncio.CancelledError
        return f"answer to {ctx.text}"


def _assert_internal_failure(task: dict[str, Any]) -> None:
    assert task["status"]["state"] == "failed", task
    data = failure_data(task)
    assert data["errorCode"] == "INTERNAL_ERROR"
    assert data["retriable"] is False
    assert data["incidentId"]
    assert "stop everything" not in str(task)


@pytest.mark.parametrize("method", ["message/send", "message/stream"])
@pytest.mark.parametrize("text", ["custom", "cancelled"])
async def test_a_base_exception_from_the_agent_fails_the_task(method: str, text: str) -> None:
    async with serving(create_app(Agent(), make_card())) as url:
        answers = await rpc(url, method, text)
        last = answers[-1]["result"]
        task_id = last.get("taskId") or last["id"]
        if method == "message/send":
            _assert_internal_failure(last)
        else:
            assert last["final"] is True, answers
            assert last["status"]["state"] == "failed", answers
        stored = await get_task(url, task_id)
        _assert_internal_failure(stored["result"])  # not left ``submitted``
        await assert_served(url)


_AGENT_FILE = """
    class Agent:
        '''Raises what a message names.'''

        async def invoke(self, ctx):
            if ctx.text == "interrupt":
                raise KeyboardInterrupt
            if ctx.text == "exit":
                raise SystemExit(3)
            return "answer to " + ctx.text


    agent = Agent()
"""


@asynccontextmanager
async def llamon_serve_file(
    tmp_path: Path,
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """``python -m llamon_agent serve`` of ``_AGENT_FILE`` on a free port (memory store)."""
    path = tmp_path / "raising_agent.py"
    path.write_text(textwrap.dedent(_AGENT_FILE))
    async with llamon_serve(
        tmp_path, "--store", "memory", worker_id=None, target=f"{path}:agent"
    ) as served:
        yield served


async def test_keyboard_interrupt_or_system_exit_in_an_agent_does_not_stop_llamon_serve(
    tmp_path: Path,
) -> None:
    async with llamon_serve_file(tmp_path) as (process, url):
        for text in ("interrupt", "exit"):
            for method in ("message/send", "message/stream"):
                answers = await rpc(url, method, text)
                last = answers[-1]["result"]
                task_id = last.get("taskId") or last["id"]
                stored = await get_task(url, task_id)
                _assert_internal_failure(stored["result"])
                assert process.returncode is None, "the server process stopped"
        (answer,) = await rpc(url, "message/send", "still there?")
        assert state_of(answer) == "completed"
        process.send_signal(signal.SIGTERM)  # a real signal still stops it
        await asyncio.wait_for(process.wait(), DEADLINE)
