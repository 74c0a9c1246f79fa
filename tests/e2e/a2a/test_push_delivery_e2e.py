"""Push delivery never sits on the caller's request, and gives up safely.

Every receiver is a Starlette app of this test on 127.0.0.1, let in by the policy's
allow-list. A receiver can hold every POST until the test releases it, answer a status
chosen per POST, or redirect. Nothing here waits by sleeping: tests wait on the
receiver's condition or on the sender's log line, with timeouts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from a2a.server.tasks import InMemoryPushNotificationConfigStore
from a2a.types import PushNotificationConfig, Task, TaskState, TaskStatus
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from llamon_agent.a2a.agent import AgentContext, AgentOutput, Chunk, FinalOutput
from llamon_agent.a2a.push import BackgroundPushSender
from llamon_agent.a2a.push_policy import PushPolicy
from llamon_agent.a2a.server import create_app
from llamon_agent.core.hitl import HITLInterrupt
from tests._support.a2a_server import make_card, running_server
from tests._support.jsonrpc import post, post_stream, request, text_message

LOOPBACK = PushPolicy(allow=["127.0.0.1/32"])
ANSWER_SECONDS = 2.0
WAIT_SECONDS = 10.0
TOKEN = "tok-Secret-9f8e"
TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})


class Receiver:
    """``/hook`` records every POST (before answering); ``/other`` records redirected ones.

    ``statuses``: the answers to give, in order (then 204). ``hold``: every POST waits
    until ``release`` is set before answering.
    """

    def __init__(self, statuses: list[int] | None = None, *, hold: bool = False) -> None:
        self.statuses = list(statuses or [])
        self.hold = hold
        self.release = asyncio.Event()
        self.posts: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.other: list[dict[str, Any]] = []
        self.changed = asyncio.Condition()
        self.app = Starlette(
            routes=[
                Route("/hook", self._hook, methods=["POST"]),
                Route("/redirect", self._redirect, methods=["POST"]),
                Route("/other", self._other, methods=["POST"]),
            ]
        )

    async def _record(self, into: list[dict[str, Any]], request: Request) -> None:
        into.append(await request.json())
        self.headers.append(dict(request.headers))
        async with self.changed:
            self.changed.notify_all()

    async def _hook(self, request: Request) -> Response:
        await self._record(self.posts, request)
        if self.hold:
            await self.release.wait()
        status = self.statuses.pop(0) if self.statuses else 204
        return Response(status_code=status)

    async def _redirect(self, request: Request) -> Response:
        await self._record(self.posts, request)
        return RedirectResponse("/other", status_code=307)

    async def _other(self, request: Request) -> Response:
        await self._record(self.other, request)
        return Response(status_code=204)

    async def until(self, condition: Callable[[], bool]) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(condition), WAIT_SECONDS)

    def states(self, task_id: str) -> list[str]:
        return [p["status"]["state"] for p in self.posts if p.get("id") == task_id]

    def terminal(self, task_id: str) -> bool:
        return any(state in TERMINAL for state in self.states(task_id))


class PushLog(logging.Handler):
    """The sender's WARNING lines, with a condition to wait on."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []
        self.changed = asyncio.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._notifying = loop.create_task(self._notify())

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def until(self, condition: Callable[[], bool]) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(condition), WAIT_SECONDS)


@contextmanager
def push_log() -> Iterator[PushLog]:
    handler = PushLog()
    logger = logging.getLogger("llamon_agent.a2a.push")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


class Chunks:
    """Streams three chunks; answers ``echo <text>`` when not streamed."""

    async def invoke(self, ctx: AgentContext) -> str:
        return f"echo {ctx.text}"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[str]:
        for index in range(3):
            yield f"chunk{index} "


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    hook = Receiver(hold=True)
    async with running_server(hook.app) as url:
        try:
            yield hook, url
        finally:
            hook.release.set()


def with_hook(hook_url: str, text: str = "hi") -> dict[str, Any]:
    return {
        "message": text_message(text),
        "configuration": {"pushNotificationConfig": {"url": hook_url, "token": TOKEN}},
    }


async def test_send_and_stream_answer_at_once_while_the_webhook_hangs(
    receiver: tuple[Receiver, str],
) -> None:
    hook, base = receiver
    app = create_app(Chunks(), make_card(push=True), push_policy=LOOPBACK)
    async with running_server(app) as url, httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
        started = time.monotonic()
        sent = await asyncio.wait_for(
            post(http, url, request("message/send", with_hook(base + "/hook"))), ANSWER_SECONDS
        )
        events = await asyncio.wait_for(
            post_stream(http, url, request("message/stream", with_hook(base + "/hook"), 2)),
            ANSWER_SECONDS,
        )
        assert time.monotonic() - started < ANSWER_SECONDS
        task_id = sent["result"]["id"]
        assert sent["result"]["status"]["state"] == "completed"
        assert events[-1]["result"]["final"] is True
        stream_id = events[-1]["result"]["taskId"]
        assert stream_id != task_id
        # the webhook got the first POST and still holds it
        await hook.until(lambda: len(hook.posts) >= 1)
        assert not hook.release.is_set()
        again = await asyncio.wait_for(
            post(http, url, request("tasks/get", {"id": task_id}, 3)), ANSWER_SECONDS
        )
        assert again["result"]["status"]["state"] == "completed"

        hook.release.set()
        await hook.until(lambda: hook.terminal(task_id) and hook.terminal(stream_id))
    # in order, per task: nothing after the terminal state, terminal last
    for tid in (task_id, stream_id):
        states = hook.states(tid)
        assert states[-1] == "completed", states
        assert "completed" not in states[:-1], states
    stream_states = hook.states(stream_id)
    assert stream_states.index("working") < stream_states.index("completed")
    assert all(h.get("x-a2a-notification-token") == TOKEN for h in hook.headers)


class AskThenChunks:
    """Asks a question (input-required); the answer is streamed as three chunks at once."""

    async def invoke(self, ctx: AgentContext) -> AgentOutput:
        return "unused"

    async def stream(self, ctx: AgentContext) -> AsyncIterator[Chunk | FinalOutput | str]:
        if not ctx.resumed:
            yield FinalOutput(HITLInterrupt(payload={"question": "which?"}))
            return
        for index in range(3):
            yield f"chunk{index} "


async def test_a_webhook_set_on_the_task_is_told_each_saved_state_once() -> None:
    hook = Receiver()
    async with running_server(hook.app) as base:
        app = create_app(AskThenChunks(), make_card(push=True), push_policy=LOOPBACK)
        async with running_server(app) as url, httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
            asked = await post_stream(
                http, url, request("message/stream", {"message": text_message("q")})
            )
            task_id = asked[-1]["result"]["taskId"]
            assert asked[-1]["result"]["status"]["state"] == "input-required"
            config = {"url": base + "/hook", "token": TOKEN}
            params = {"taskId": task_id, "pushNotificationConfig": config}
            set_reply = await post(
                http, url, request("tasks/pushNotificationConfig/set", params, 2)
            )
            assert "result" in set_reply, set_reply

            answer = text_message("this one", taskId=task_id)  # no webhook in the request
            events = await post_stream(http, url, request("message/stream", {"message": answer}, 3))
            assert events[-1]["result"]["status"]["state"] == "completed"
            again = await post_stream(
                http, url, request("message/stream", {"message": text_message("q")}, 4)
            )
            assert again[-1]["result"]["status"]["state"] == "input-required"
        # the server stopped: its push sender delivered everything it had queued
        states = hook.states(task_id)
        # the chunks came at once and were stored by one save: one push for it, the end
        assert states == ["completed"], states


async def test_a_5xx_answer_is_retried_until_the_webhook_takes_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="httpx")
    caplog.set_level(logging.DEBUG, logger="httpcore")
    hook = Receiver([503, 500])
    async with running_server(hook.app) as base:
        app = create_app(Chunks(), make_card(push=True), push_policy=LOOPBACK)
        async with running_server(app) as url, httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
            sent = await post(http, url, request("message/send", with_hook(base + "/hook")))
            task_id = sent["result"]["id"]
            await hook.until(lambda: len(hook.posts) >= 3)
            sender = app.state.llamon_push_sender
            assert isinstance(sender, BackgroundPushSender)
            assert sender.stats.retried >= 2
            assert sender.stats.dropped == 0
            # the same notification, three times: 503, 500, then taken
            assert [p["id"] for p in hook.posts[:3]] == [task_id] * 3
            assert hook.posts[0] == hook.posts[1] == hook.posts[2]
            after = await post(http, url, request("message/send", {"message": text_message()}))
            assert after["result"]["status"]["state"] == "completed"
    # httpx logs the test's own two POSTs, never the three webhook POSTs (nor their URL)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith(("httpx", "httpcore"))]
    posts = [line for line in lines if line.startswith("HTTP Request: POST ")]
    assert posts == ['HTTP Request: POST [REDACTED:url] "HTTP/1.1 200 OK"'] * 2
    assert not [line for line in lines if base in line or base.rsplit(":", 1)[1] in line]


def _task(task_id: str, number: int) -> Task:
    return Task(
        id=task_id,
        context_id="ctx",
        status=TaskStatus(state=TaskState.working),
        metadata={"n": number},
    )


async def test_a_full_queue_drops_the_oldest_and_counts_it(
    receiver: tuple[Receiver, str],
) -> None:
    hook, base = receiver
    store = InMemoryPushNotificationConfigStore()
    secret_url = base.replace("http://", "http://hookuser:UrlPass-77@") + "/hook"
    await store.set_info("t-1", PushNotificationConfig(url=secret_url, token=TOKEN))
    sender = BackgroundPushSender(store, LOOPBACK, max_pending=2)
    with push_log() as log:
        try:
            await sender.send_notification(_task("t-1", 0))
            await hook.until(lambda: len(hook.posts) == 1)  # in flight, held
            for number in range(1, 6):  # queue of 2: 1, 2, 3 dropped
                await sender.send_notification(_task("t-1", number))
            assert sender.stats.dropped == 3
            assert sender.stats.dropped_by_reason["queue full"] == 3
            await log.until(lambda: len(log.messages) >= 3)
            hook.release.set()
            await hook.until(lambda: len(hook.posts) == 3)
        finally:
            await sender.aclose(grace=WAIT_SECONDS)
    assert [p["metadata"]["n"] for p in hook.posts] == [0, 4, 5]
    assert sender.stats.delivered == 3
    assert log.messages[0] == "push notification for task t-1 dropped: queue full"
    for message in log.messages:
        for secret in ("UrlPass-77", "hookuser", TOKEN, "127.0.0.1", "/hook"):
            assert secret not in message


async def test_a_redirect_is_not_followed_and_is_logged_without_the_url() -> None:
    hook = Receiver()
    async with running_server(hook.app) as base:
        app = create_app(Chunks(), make_card(push=True), push_policy=LOOPBACK)
        secret_url = base.replace("http://", "http://u:UrlPass-77@") + "/redirect"
        with push_log() as log:
            async with running_server(app) as url, httpx.AsyncClient() as http:
                sent = await post(http, url, request("message/send", with_hook(secret_url)))
                task_id = sent["result"]["id"]
                await log.until(lambda: len(log.messages) >= 1)
                after = await post(http, url, request("tasks/get", {"id": task_id}, 2))
    assert after["result"]["status"]["state"] == "completed"
    assert hook.other == []
    assert len(hook.posts) == 1  # a redirect is not retried
    assert log.messages[0] == (
        f"push notification for task {task_id} dropped: "
        "the webhook answered a redirect (HTTP 307), not followed"
    )
    assert all("UrlPass-77" not in m and "127.0.0.1" not in m for m in log.messages)


async def test_shutdown_with_a_hanging_webhook_ends_within_the_grace(
    receiver: tuple[Receiver, str],
) -> None:
    hook, base = receiver
    app = create_app(Chunks(), make_card(push=True), push_policy=LOOPBACK)
    sender = app.state.llamon_push_sender
    assert isinstance(sender, BackgroundPushSender)
    with push_log() as log:
        async with running_server(app) as url, httpx.AsyncClient() as http:
            sent = await post(http, url, request("message/send", with_hook(base + "/hook")))
            await hook.until(lambda: len(hook.posts) >= 1)
            stopping = time.monotonic()
        stopped = time.monotonic() - stopping
    assert sent["result"]["status"]["state"] == "completed"
    assert stopped < 2.0 + 3.0  # the 2 s grace, and uvicorn's own stop
    assert sender.stats.dropped_by_reason["server stopping"] >= 1
    assert any(m.endswith("dropped: server stopping") for m in log.messages)
