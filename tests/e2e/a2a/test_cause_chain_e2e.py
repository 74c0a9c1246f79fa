"""The failure's path across hops: A calls B, B calls C, C fails; A's caller reads
``data.cause == [hop B, hop C]`` (agent, task id, errorCode, errorReason, errorSource),
A's failure record keeps the same chain, no loopback address shows anywhere, and the
next request through the same three agents is answered (all real servers on 127.0.0.1).

A and B call the next agent with ``AgentClient`` and let its ``RemoteAgentError``
propagate: that is all an agent does; the SDK builds ``data.cause`` from it. C fails with
``UPSTREAM_UNAVAILABLE``, a code that passes a hop unchanged.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from a2a.types import AgentCard, TaskState

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import AgentClient, RemoteUnavailableError, clear_card_cache
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import raise_application_error
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    texts,
    user_message,
)


def _named(name: str) -> AgentCard:
    return make_card(streaming=False).model_copy(update={"name": name})


class Failing:
    """Agent C: fails the first request with a known code, reason and source (not
    retriable: no retry policy calls it again)."""

    def __init__(self) -> None:
        self.task_ids: list[str] = []

    async def invoke(self, ctx: AgentContext) -> str:
        self.task_ids.append(ctx.task_id)
        if len(self.task_ids) == 1:
            raise_application_error(
                ErrorCode.UPSTREAM_UNAVAILABLE,
                "ocr_service_down",
                message="OCR at https://ocr.internal:8443/recognize refused the call",
                retriable=False,
                errorSource="http:ocr/recognize",
            )
        return f"pong: {ctx.text}"


class Calling:
    """Agents A and B: forward the text with ``AgentClient``; its failure propagates."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.task_ids: list[str] = []
        self.errors: list[RemoteUnavailableError] = []

    async def invoke(self, ctx: AgentContext) -> str:
        self.task_ids.append(ctx.task_id)
        async with AgentClient(self.url, timeout=10.0) as called:
            try:
                return (await called.send(ctx.text)).text
            except RemoteUnavailableError as error:
                self.errors.append(error)
                raise  # re-raised as it is: the caller's data.cause gets the path


def _logged_cause(records: list[logging.LogRecord], task_id: str) -> Any:
    """``evidence["cause"]`` of the failure record logged for ``task_id``."""
    for record in records:
        args = record.args if isinstance(record.args, tuple) else ()
        if record.name == "llamon_agent.failures" and args[:1] == (task_id,):
            return json.loads(str(args[2]))["evidence"].get("cause")
    raise AssertionError(f"no failure record logged for task {task_id}")


async def test_a_failure_two_hops_down_shows_its_path_to_the_first_caller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="llamon_agent.failures")
    clear_card_cache()
    agent_c = Failing()
    async with running_server(create_app(agent_c, _named("agent-c"))) as url_c:
        agent_b = Calling(url_c)
        async with running_server(create_app(agent_b, _named("agent-b"))) as url_b:
            agent_a = Calling(url_b)
            app_a = create_app(agent_a, _named("agent-a"))
            async with running_server(app_a) as url_a, a2a_client(url_a) as client:
                failed = await send(client, user_message("read this scan"))
                following = await send(client, user_message("read it again"))

    assert failed.status.state == TaskState.failed
    data = error_data(failed)
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "UPSTREAM_UNAVAILABLE",
        "ocr_service_down",
        False,
    )
    hop_b = {
        "agent": "agent-b",
        "taskId": agent_b.task_ids[0],
        "errorCode": "UPSTREAM_UNAVAILABLE",
        "errorReason": "ocr_service_down",
    }
    hop_c = {
        "agent": "agent-c",
        "taskId": agent_c.task_ids[0],
        "errorCode": "UPSTREAM_UNAVAILABLE",
        "errorReason": "ocr_service_down",
        "errorSource": "http:ocr/recognize",
    }
    assert data["cause"] == [hop_b, hop_c]
    (seen_by_b,) = agent_b.errors  # what B's AgentClient raised for C's answer
    (seen_by_a,) = agent_a.errors
    assert seen_by_b.cause_hops == [hop_c]
    assert seen_by_a.cause_hops == [hop_b, hop_c]
    assert (seen_by_a.agent, seen_by_a.task_id) == ("agent-b", agent_b.task_ids[0])
    assert _logged_cause(caplog.records, failed.id) == [hop_b, hop_c]
    assert _logged_cause(caplog.records, agent_b.task_ids[0]) == [hop_c]

    shown = json.dumps(failed.model_dump(mode="json"))
    assert "127.0.0.1" not in shown
    for url in (url_b, url_c):
        assert url.removeprefix("http://") not in shown
    assert "ocr.internal" not in shown

    assert following.status.state == TaskState.completed
    assert texts(following) == ["pong: read it again"]
    assert len(agent_c.task_ids) == 2
