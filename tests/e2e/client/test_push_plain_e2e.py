"""Push notifications from a plain a2a-sdk server (not llamon: ``DefaultRequestHandler``,
``BasePushNotificationSender``, ``InMemoryPushNotificationConfigStore``) to a real
``push_receiver``; and from the same server with a sender that signs each notification
with a JWT (ES256, its key published as a JWKS), to a receiver that verifies it.
Everything runs on 127.0.0.1; nothing sleeps."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    PushNotificationConfigStore,
    TaskUpdater,
)
from a2a.types import (
    Message,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskState,
    TaskStatus,
    TextPart,
)
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from llamon_agent.client import (
    AgentClient,
    RemoteInternalError,
    clear_card_cache,
    push_receiver,
)
from llamon_agent.core.codes import ErrorCode
from tests._support.a2a_server import make_card, running_server

WAIT = 10.0
KID = "push-key-1"


class PlainExecutor(AgentExecutor):
    """``hold ...`` waits for ``gate``; ``... fail`` fails with text only (``instant fail``:
    its first event is the failed task); else answers ``plain <text>``."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = asyncio.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        text = context.get_user_input()
        if text == "instant fail":  # the first event is already the failed task
            down = Message(
                role=Role.agent, parts=[Part(root=TextPart(text="down"))], message_id="m-down"
            )
            failed = TaskStatus(state=TaskState.failed, message=down)
            ids = {"id": str(context.task_id), "context_id": str(context.context_id)}
            await event_queue.enqueue_event(Task(**ids, status=failed))
            return
        task = Task(
            id=str(context.task_id),
            context_id=str(context.context_id),
            status=TaskStatus(state=TaskState.submitted),
            history=[context.message],
        )
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        self.started.set()
        if text.startswith("hold"):
            await asyncio.wait_for(self.gate.wait(), WAIT)
        if text.endswith("fail"):
            await updater.failed(updater.new_agent_message([Part(root=TextPart(text="down"))]))
            return
        await updater.add_artifact([Part(root=TextPart(text=f"plain {text}"))], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def sign(key: ec.EllipticCurvePrivateKey, body: bytes, *, iat: float | None = None) -> str:
    claims = {
        "iat": int(time.time() if iat is None else iat),
        "request_body_sha256": hashlib.sha256(body).hexdigest(),
    }
    return jwt.encode(claims, key, algorithm="ES256", headers={"kid": KID})


class SigningSender(BasePushNotificationSender):
    """a2a-sdk's sender, plus ``Authorization: Bearer <JWT>`` over the exact body sent."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        store: PushNotificationConfigStore,
        key: ec.EllipticCurvePrivateKey,
    ) -> None:
        super().__init__(http, store)
        self._key = key

    async def _dispatch_notification(self, task: Task, push_info: PushNotificationConfig) -> bool:
        body = json.dumps(
            task.model_dump(mode="json", exclude_none=True),
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
        headers = {
            "Content-Type": "application/json",
            "Authorization": "Bearer " + sign(self._key, body),
        }
        if push_info.token:
            headers["X-A2A-Notification-Token"] = push_info.token
        response = await self._client.post(push_info.url, content=body, headers=headers)
        return response.is_success


@dataclass
class Plain:
    executor: PlainExecutor
    url: str
    key: ec.EllipticCurvePrivateKey

    @property
    def jwks_url(self) -> str:
        return self.url + "/.well-known/jwks.json"


def public_jwk(key: ec.EllipticCurvePrivateKey) -> dict[str, Any]:
    jwk: dict[str, Any] = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {**jwk, "kid": KID, "alg": "ES256", "use": "sig"}


@asynccontextmanager
async def plain_server(*, signing: bool) -> AsyncIterator[Plain]:
    """A plain a2a-sdk server with push; ``signing``: its sender signs (JWKS served)."""
    clear_card_cache()
    key = ec.generate_private_key(ec.SECP256R1())
    executor = PlainExecutor()
    store = InMemoryPushNotificationConfigStore()
    async with httpx.AsyncClient(timeout=WAIT) as http:
        sender = (
            SigningSender(http, store, key) if signing else BasePushNotificationSender(http, store)
        )
        handler = DefaultRequestHandler(
            executor, InMemoryTaskStore(), push_config_store=store, push_sender=sender
        )
        app = A2AStarletteApplication(make_card(streaming=False, push=True), handler).build()

        async def jwks(request: Request) -> JSONResponse:
            return JSONResponse({"keys": [public_jwk(key)]})

        app.router.routes.append(Route("/.well-known/jwks.json", jwks))
        async with running_server(app) as url:
            try:
                yield Plain(executor, url, key)
            finally:
                executor.gate.set()


@pytest.fixture
async def plain() -> AsyncIterator[Plain]:
    async with plain_server(signing=False) as server:
        yield server


@pytest.fixture
async def signing() -> AsyncIterator[Plain]:
    async with plain_server(signing=True) as server:
        yield server


async def test_a_plain_server_pushes_the_completed_task(plain: Plain) -> None:
    receiver = push_receiver()
    async with receiver.serve(), AgentClient(plain.url, timeout=WAIT) as agent:
        started = await agent.start("hi", push=receiver)
        assert started.task_id is not None
        result = await receiver.wait(started.task_id, timeout=WAIT)
    assert (result.state, result.text, result.task_id) == (
        TaskState.completed,
        "plain hi",
        started.task_id,
    )


@pytest.mark.reason("remote_task_failed")
async def test_a_plain_failed_task_raises_classified_from_its_state(plain: Plain) -> None:
    receiver = push_receiver()
    async with receiver.serve(), AgentClient(plain.url, timeout=WAIT) as agent:
        started = await agent.start("hold fail", push=receiver)
        assert started.task_id is not None
        plain.executor.gate.set()
        with pytest.raises(RemoteInternalError) as caught:
            await receiver.wait(started.task_id, timeout=WAIT)
        again = await agent.start("next", push=receiver)
        assert again.task_id is not None
        following = await receiver.wait(again.task_id, timeout=WAIT)
    error = caught.value
    assert (error.code, error.reason, error.retriable, error.data) == (
        ErrorCode.INTERNAL_ERROR,
        "remote_task_failed",
        False,
        None,
    )
    assert (error.message, error.task_id) == ("down", started.task_id)
    assert following.text == "plain next"


async def test_a_task_failed_before_start_answers_raises_from_start(plain: Plain) -> None:
    receiver = push_receiver()
    async with receiver.serve(), AgentClient(plain.url, timeout=WAIT) as agent:
        with pytest.raises(RemoteInternalError) as caught:
            await agent.start("instant fail", push=receiver)
        assert receiver.pending == 0  # its registration is retired
        following = await agent.start("next", push=receiver)
        assert following.task_id is not None
        assert (await receiver.wait(following.task_id, timeout=WAIT)).text == "plain next"
    assert (caught.value.reason, caught.value.message) == ("remote_task_failed", "down")


async def test_register_push_on_a_plain_server(plain: Plain) -> None:
    first, second = push_receiver(), push_receiver()
    async with first.serve(), second.serve(), AgentClient(plain.url, timeout=WAIT) as agent:
        started = await agent.start("hold", push=first)
        assert started.task_id is not None
        await agent.register_push(started.task_id, second)
        plain.executor.gate.set()
        results = [await r.wait(started.task_id, timeout=WAIT) for r in (first, second)]
    assert [r.text for r in results] == ["plain hold", "plain hold"]


@pytest.mark.parametrize("keys", ["jwk", "jwks_url"])
async def test_signed_notifications_are_verified(signing: Plain, keys: str) -> None:
    receiver = (
        push_receiver(jwt_key=public_jwk(signing.key))
        if keys == "jwk"
        else push_receiver(jwks_url=signing.jwks_url)
    )
    async with receiver.serve(), AgentClient(signing.url, timeout=WAIT) as agent:
        started = await agent.start("signed", push=receiver)
        assert started.task_id is not None
        result = await receiver.wait(started.task_id, timeout=WAIT)
    assert (result.state, result.text) == (TaskState.completed, "plain signed")


async def test_a_bad_signature_is_refused_and_the_next_notification_accepted(
    signing: Plain,
) -> None:
    receiver = push_receiver(jwt_key=public_jwk(signing.key))
    async with (
        receiver.serve(),
        AgentClient(signing.url, timeout=WAIT) as agent,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        started = await agent.start("hold", push=receiver)
        assert started.task_id is not None
        assert started.context_id is not None
        await asyncio.wait_for(signing.executor.started.wait(), WAIT)
        # a POST with the right token, signed by another key, for the real task
        config = receiver.register()  # a token of ours, to forge with
        forged_task = Task(
            id=started.task_id,
            context_id=started.context_id,
            status=TaskStatus(state=TaskState.completed),
        )
        body = forged_task.model_dump_json(by_alias=True, exclude_none=True).encode()
        other_key = ec.generate_private_key(ec.SECP256R1())
        assert receiver.url is not None
        assert config.token is not None
        answers = []
        for authorization in (
            None,
            "Bearer " + sign(other_key, body),  # wrong key
            "Bearer " + sign(signing.key, body, iat=time.time() - 3600),  # stale
            "Bearer " + sign(signing.key, b"{}"),  # signs another body
            "Bearer not-a-jwt",
        ):
            headers = {"X-A2A-Notification-Token": config.token}
            if authorization is not None:
                headers["Authorization"] = authorization
            answer = await http.post(receiver.url, content=body, headers=headers)
            answers.append((answer.status_code, answer.json()["error"]))
        assert answers == [
            (401, "push_signature_required"),
            (401, "push_signature_invalid"),
            (401, "push_signature_invalid"),
            (401, "push_signature_invalid"),
            (401, "push_signature_invalid"),
        ]
        assert receiver.current(started.task_id) is None or (
            receiver.current(started.task_id).status.state  # type: ignore[union-attr]
            != TaskState.completed
        )
        signing.executor.gate.set()
        result = await receiver.wait(started.task_id, timeout=WAIT)
    assert (result.state, result.text) == (TaskState.completed, "plain hold")
