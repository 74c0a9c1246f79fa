"""The failure's path across hops: A calls B, B calls C, C fails; A's caller reads
``data.cause == [hop B, hop C]`` (agent, task id, errorCode, errorReason, errorSource),
A's failure record keeps the same chain, no loopback address shows anywhere, and the
next request through the same three agents is answered (all real servers on 127.0.0.1,
a2a-sdk's own client at every hop).

``CalledAgentFailed`` is a test double of the client's ``RemoteAgentError`` contract: an
exception from a called agent that carries that agent's answer (``carried``: its
errorCode, errorReason, retriable) and ``cause_hops`` -- the called agent's own hop first
(its card name, its failed task's id, code, reason, source), then the hops of its own
``data.cause``. Raising it inside a llamon agent is all an agent does; the SDK builds
``data.cause`` from it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import AgentCard, Task, TaskState

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.core.codes import ErrorCode, ErrorRule
from llamon_agent.core.errors import raise_application_error
from llamon_agent.exceptions import LlamonError
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    texts,
    user_message,
)


class CalledAgentFailed(LlamonError):
    """Test double of ``RemoteAgentError``: the called agent's answer and failure path."""

    def __init__(
        self, message: str, *, rule: ErrorRule, hops: Sequence[Mapping[str, object]]
    ) -> None:
        super().__init__(message)
        self._rule = rule
        self._hops = list(hops)

    @property
    def carried(self) -> ErrorRule:
        return self._rule

    @property
    def cause_hops(self) -> list[Mapping[str, object]]:
        return self._hops

    @classmethod
    def from_task(cls, card: AgentCard, url: str, task: Task) -> CalledAgentFailed:
        """What the client will raise for ``task``, a failed task of the agent ``card``."""
        data = error_data(task)
        own = {
            "agent": card.name,
            "taskId": task.id,
            "errorCode": data.get("errorCode"),
            "errorReason": data.get("errorReason"),
            "errorSource": data.get("errorSource"),
        }
        hop = {key: value for key, value in own.items() if value is not None}
        rule = ErrorRule(ErrorCode(data["errorCode"]), data["errorReason"], data["retriable"])
        message = f"{card.name} at {url} failed: {data.get('errorMessage', '')}"
        return cls(message, rule=rule, hops=[hop, *data.get("cause", [])])


def _named(name: str) -> AgentCard:
    return make_card(streaming=False).model_copy(update={"name": name})


class Failing:
    """Agent C: fails the first request with a known code, reason and source."""

    def __init__(self) -> None:
        self.task_ids: list[str] = []

    async def invoke(self, ctx: AgentContext) -> str:
        self.task_ids.append(ctx.task_id)
        if len(self.task_ids) == 1:
            raise_application_error(
                ErrorCode.UPSTREAM_UNAVAILABLE,
                "ocr_service_down",
                message="OCR at https://ocr.internal:8443/recognize refused the call",
                retriable=True,
                errorSource="http:ocr/recognize",
            )
        return f"pong: {ctx.text}"


class Calling:
    """Agents A and B: forward the text with a2a-sdk's client; re-raise a failed task."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.task_ids: list[str] = []

    async def invoke(self, ctx: AgentContext) -> str:
        self.task_ids.append(ctx.task_id)
        async with httpx.AsyncClient(timeout=10.0) as http:
            found = (await http.get(f"{self.url}/.well-known/agent-card.json")).json()
            card = AgentCard.model_validate(found).model_copy(update={"url": self.url + "/"})
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
            task = await send(client, user_message(ctx.text))
        if task.status.state == TaskState.failed:
            raise CalledAgentFailed.from_task(card, self.url, task)
        return "".join(texts(task))


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
        True,
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
