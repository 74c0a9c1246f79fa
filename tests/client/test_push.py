"""``push_receiver``: what it accepts, what it refuses (and with which answer), what
``wait`` hands back, and the bounds it keeps. The receiver's own Starlette app is driven
in-process through httpx; end-to-end runs with real servers are in tests/e2e/client."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jwt
import pytest
from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus, TextPart
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

from llamon_agent.client import (
    PushReceiver,
    PushReceiverFullError,
    RemoteInvalidInputError,
    RemoteTimeoutError,
    push_receiver,
)

URL = "http://127.0.0.1:9/a2a/push"
HEADER = "X-A2A-Notification-Token"
WAIT = 5.0


def task(task_id: str = "t1", state: TaskState = TaskState.completed, text: str = "done") -> Task:
    artifacts = [Artifact(artifact_id="a", parts=[Part(root=TextPart(text=text))])]
    return Task(
        id=task_id,
        context_id="c1",
        status=TaskStatus(state=state),
        artifacts=artifacts if state == TaskState.completed else None,
    )


def body(t: Task) -> bytes:
    return t.model_dump_json(by_alias=True, exclude_none=True).encode()


@pytest.fixture
async def http() -> AsyncIterator[tuple[PushReceiver, httpx.AsyncClient]]:
    receiver = push_receiver(URL)
    transport = httpx.ASGITransport(app=receiver.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:9") as client:
        yield receiver, client


async def post(
    client: httpx.AsyncClient, content: bytes, token: str | None, **headers: str
) -> httpx.Response:
    if token is not None:
        headers[HEADER] = token
    return await client.post("/a2a/push", content=content, headers=headers)


async def test_a_registered_task_resolves_its_wait(
    http: tuple[PushReceiver, httpx.AsyncClient],
) -> None:
    receiver, client = http
    config = receiver.register("t1")
    assert config.url == URL
    assert config.token is not None
    assert len(config.token) >= 40
    assert config.id is not None
    waiting = asyncio.create_task(receiver.wait("t1", timeout=WAIT))
    working = await post(client, body(task(state=TaskState.working)), config.token)
    assert (working.status_code, working.json()) == (200, {"status": "received"})
    assert not waiting.done()
    current = receiver.current("t1")
    assert current is not None
    assert current.status.state == TaskState.working
    answer = await post(client, body(task()), config.token)
    assert answer.status_code == 200
    result = await waiting
    assert (result.state, result.text, result.task_id) == (TaskState.completed, "done", "t1")
    assert receiver.pending == 0
    # retired: its token is refused from now on
    late = await post(client, body(task()), config.token)
    assert (late.status_code, late.json()["error"]) == (401, "push_token_invalid")


async def test_every_refusal_names_its_error_and_the_next_post_is_accepted(
    http: tuple[PushReceiver, httpx.AsyncClient],
    caplog: pytest.LogCaptureFixture,
) -> None:
    receiver, client = http
    config = receiver.register("t1")
    other = receiver.register("t2")
    token = config.token
    assert token is not None
    assert other.token is not None
    caplog.set_level(logging.DEBUG, logger="llamon_agent.client.push")
    refused = [
        (await post(client, body(task()), None), 401, "push_token_required"),
        (await post(client, body(task()), token + "x"), 401, "push_token_invalid"),
        (await post(client, body(task()), other.token[:-1]), 401, "push_token_invalid"),
        (await post(client, b"{not json", token), 400, "push_body_invalid"),
        (await post(client, b'{"id": "t1"}', token), 400, "push_body_invalid"),
        (await post(client, b"[]", token), 400, "push_body_invalid"),
        (await post(client, body(task("t2")), token), 403, "push_task_mismatch"),
    ]
    for response, status, error in refused:
        assert (response.status_code, response.json()["error"]) == (status, error)
        assert set(response.json()) == {"error", "message"}
        assert token not in response.text
        assert other.token not in response.text
    assert receiver.current("t1") is None
    messages = [record.getMessage() for record in caplog.records]
    assert messages[:2] == [
        "push notification refused: push_token_required",
        "push notification refused: push_token_invalid",
    ]
    assert not any(token in m or other.token in m for m in messages)
    accepted = await post(client, body(task()), token)
    assert accepted.status_code == 200
    assert (await receiver.wait("t1", timeout=WAIT)).text == "done"


async def test_a_large_body_is_refused_unread(
    http: tuple[PushReceiver, httpx.AsyncClient],
) -> None:
    receiver, client = http
    receiver.max_body_bytes = 200
    config = receiver.register("t1")
    assert config.token is not None
    big = body(task(text="x" * 400))
    declared = await post(client, big, config.token)
    assert (declared.status_code, declared.json()["error"]) == (413, "push_body_too_large")

    async def chunks() -> AsyncIterator[bytes]:
        yield big[:150]
        yield big[150:]

    streamed = await client.post(
        "/a2a/push", content=chunks(), headers={HEADER: config.token}
    )  # no Content-Length: counted while read
    assert (streamed.status_code, streamed.json()["error"]) == (413, "push_body_too_large")
    small = await post(client, body(task(text="ok")), config.token)
    assert small.status_code == 200


async def test_only_post_is_served(http: tuple[PushReceiver, httpx.AsyncClient]) -> None:
    _, client = http
    assert (await client.get("/a2a/push")).status_code == 405
    assert (await client.post("/elsewhere", content=b"{}")).status_code == 404


async def test_a_token_given_before_the_task_binds_on_the_first_notification(
    http: tuple[PushReceiver, httpx.AsyncClient],
) -> None:
    receiver, client = http
    first = receiver.register()
    second = receiver.register()
    assert first.token is not None
    assert second.token is not None
    assert (await post(client, body(task("t9", TaskState.working)), first.token)).status_code == 200
    # t9 is taken: the other token cannot claim it, nor can the first switch tasks
    taken = await post(client, body(task("t9")), second.token)
    switched = await post(client, body(task("t8")), first.token)
    assert [taken.status_code, switched.status_code] == [403, 403]
    assert (await post(client, body(task("t9")), first.token)).status_code == 200
    assert (await receiver.wait("t9", timeout=WAIT)).text == "done"


async def test_input_required_resolves_then_the_next_wait_gets_the_end(
    http: tuple[PushReceiver, httpx.AsyncClient],
) -> None:
    receiver, client = http
    config = receiver.register("t1")
    assert config.token is not None
    question = Message(
        role=Role.agent, parts=[Part(root=TextPart(text="Which city?"))], message_id="q"
    )
    paused = task(state=TaskState.input_required).model_copy(
        update={"status": TaskStatus(state=TaskState.input_required, message=question)}
    )
    await post(client, body(paused), config.token)
    asked = await receiver.wait("t1", timeout=WAIT)
    assert (asked.needs_input, asked.question, receiver.pending) == (True, "Which city?", 1)
    waiting = asyncio.create_task(receiver.wait("t1", timeout=WAIT))
    await post(client, body(task(state=TaskState.working)), config.token)
    assert not waiting.done()
    await post(client, body(task(text="Paris")), config.token)
    assert (await waiting).text == "Paris"


@pytest.mark.reason("remote_task_rejected")
async def test_a_rejected_task_raises_from_wait(
    http: tuple[PushReceiver, httpx.AsyncClient],
) -> None:
    receiver, client = http
    config = receiver.register("t1", agent="billing")
    assert config.token is not None
    await post(client, body(task(state=TaskState.rejected)), config.token)
    with pytest.raises(RemoteInvalidInputError) as caught:
        await receiver.wait("t1", timeout=WAIT)
    assert (caught.value.reason, caught.value.agent, caught.value.task_id) == (
        "remote_task_rejected",
        "billing",
        "t1",
    )
    assert receiver.pending == 0


async def test_a_pause_nobody_waited_on_is_dropped_once_the_task_moves_on(
    http: tuple[PushReceiver, httpx.AsyncClient],
) -> None:
    receiver, client = http
    config = receiver.register("t1")
    assert config.token is not None
    await post(client, body(task(state=TaskState.input_required)), config.token)
    await post(client, body(task(state=TaskState.working)), config.token)
    waiting = asyncio.create_task(receiver.wait("t1", timeout=WAIT))
    await post(client, body(task(state=TaskState.working)), config.token)
    assert not waiting.done()
    await post(client, body(task(text="answered")), config.token)
    assert (await waiting).text == "answered"


async def test_a_notification_after_the_end_is_acknowledged_and_ignored(
    http: tuple[PushReceiver, httpx.AsyncClient],
) -> None:
    receiver, client = http
    config = receiver.register("t1")
    assert config.token is not None
    await post(client, body(task(text="first")), config.token)
    again = await post(client, body(task(state=TaskState.working)), config.token)
    assert again.status_code == 200
    assert (await receiver.wait("t1", timeout=WAIT)).text == "first"


async def test_registrations_are_bounded_and_forgotten() -> None:
    receiver = push_receiver(URL, max_pending=2)
    first = receiver.register("t1")
    receiver.register()
    with pytest.raises(PushReceiverFullError) as caught:
        receiver.register()
    assert str(caught.value) == (
        "the push receiver holds 2 open registrations; wait on or forget one first"
    )
    waiting = asyncio.create_task(receiver.wait("t1", timeout=WAIT))
    await asyncio.sleep(0)  # one turn of the loop: the wait is now waiting (not a timed sleep)
    receiver.forget(first)
    with pytest.raises(LookupError):
        await waiting
    assert receiver.pending == 1
    receiver.register("t3")
    receiver.forget("t3")
    assert receiver.pending == 1


async def test_registration_misuse_is_refused_locally() -> None:
    with pytest.raises(ValueError, match="url is not known yet"):
        push_receiver().register()
    receiver = push_receiver(URL)
    receiver.register("t1", token="mine")
    with pytest.raises(ValueError, match="already registered"):
        receiver.register(token="mine")
    with pytest.raises(ValueError, match="task 't1' is already registered"):
        receiver.register("t1")
    with pytest.raises(ValueError, match="must not be empty"):
        receiver.register(token=" ")
    with pytest.raises(LookupError, match="'nope' is not registered"):
        await receiver.wait("nope")
    with pytest.raises(ValueError, match="max_pending"):
        push_receiver(URL, max_pending=0)
    with pytest.raises(ValueError, match="may not name 'none'"):
        push_receiver(URL, jwt_key=jwk(), jwt_algorithms=["ES256", "none"])
    with pytest.raises(ValueError, match="at least one algorithm"):
        push_receiver(URL, jwt_key=jwk(), jwt_algorithms=[])
    assert "mine" not in repr(receiver)
    assert repr(receiver) == "PushReceiver(path='/a2a/push', open=1)"


@pytest.mark.reason("push_wait_timeout")
async def test_a_wait_past_its_timeout_raises_typed_and_may_be_repeated() -> None:
    receiver = push_receiver(URL)
    receiver.register("t1", agent="billing")
    with pytest.raises(RemoteTimeoutError) as caught:
        await receiver.wait("t1", timeout=0.01)
    error = caught.value
    assert (error.reason, error.retriable, error.task_id, error.agent) == (
        "push_wait_timeout",
        True,
        "t1",
        "billing",
    )
    assert isinstance(error, TimeoutError)
    assert str(error) == "no push notification ended task 't1' within 0.01 s"
    assert receiver.pending == 1
    receiver.bind(receiver.register(), task("t2"))  # an answer that already ended
    assert (await receiver.wait("t2", timeout=WAIT)).text == "done"


# -- signed notifications ---------------------------------------------------------------

KEY = ec.generate_private_key(ec.SECP256R1())
NOW = 1_800_000_000.0


def jwk(kid: str = "k1") -> dict[str, Any]:
    public: dict[str, Any] = ECAlgorithm.to_jwk(KEY.public_key(), as_dict=True)
    return {**public, "kid": kid}


def signed(content: bytes, *, iat: float = NOW, kid: str = "k1", **claims: Any) -> str:
    payload = {"iat": int(iat), "request_body_sha256": hashlib.sha256(content).hexdigest()}
    payload.update(claims)
    return "Bearer " + jwt.encode(payload, KEY, algorithm="ES256", headers={"kid": kid})


async def signed_receiver(**options: Any) -> tuple[PushReceiver, httpx.AsyncClient, str]:
    receiver = push_receiver(URL, clock=lambda: NOW, **options)
    token = receiver.register("t1").token
    assert token is not None
    transport = httpx.ASGITransport(app=receiver.app)
    return receiver, httpx.AsyncClient(transport=transport, base_url="http://x"), token


@pytest.mark.parametrize(
    ("key", "authorization", "status", "error"),
    [
        ("jwk", lambda c: signed(c), 200, None),
        ("jwks", lambda c: signed(c), 200, None),
        ("jwks", lambda c: signed(c, kid="k2"), 401, "push_signature_invalid"),
        ("jwk", lambda c: signed(c, iat=NOW - 301), 401, "push_signature_invalid"),
        ("jwk", lambda c: signed(c, iat=NOW + 60), 401, "push_signature_invalid"),
        ("jwk", lambda c: signed(c, iat=NOW - 299), 200, None),
        ("jwk", lambda c: signed(b"other"), 401, "push_signature_invalid"),
        ("jwk", lambda c: signed(c, request_body_sha256=None), 401, "push_signature_invalid"),
        ("jwk", lambda c: "Basic dXNlcjpwdw==", 401, "push_signature_required"),
        ("jwk", lambda c: "Bearer a.b.c", 401, "push_signature_invalid"),
        (
            "jwk",
            lambda c: "Bearer " + jwt.encode({"iat": int(NOW)}, "k" * 32, algorithm="HS256"),
            401,
            "push_signature_invalid",
        ),
        (
            "jwk",
            lambda c: (
                "Bearer "
                + jwt.encode(
                    {"iat": int(NOW), "request_body_sha256": hashlib.sha256(c).hexdigest()},
                    "",
                    algorithm="none",
                )
            ),
            401,
            "push_signature_invalid",
        ),
    ],
)
async def test_a_signed_notification_is_checked(
    key: str, authorization: Any, status: int, error: str | None
) -> None:
    keys = jwk() if key == "jwk" else {"keys": [jwk("k0"), jwk("k1")]}
    receiver, client, token = await signed_receiver(jwt_key=keys)
    content = body(task())
    async with client:
        response = await client.post(
            "/a2a/push",
            content=content,
            headers={HEADER: token, "Authorization": authorization(content)},
        )
        assert response.status_code == status
        assert response.json().get("error") == error
        # whatever was refused, the next signed notification is taken
        following = await client.post(
            "/a2a/push",
            content=content,
            headers={HEADER: token, "Authorization": signed(content)},
        )
    assert following.status_code == 200
    assert (await receiver.wait("t1", timeout=WAIT)).text == "done"


async def test_a_failure_of_the_receiver_answers_500_naming_only_its_type(
    http: tuple[PushReceiver, httpx.AsyncClient],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    receiver, client = http
    config = receiver.register("t1")
    assert config.token is not None

    def broken(token: str | None) -> None:
        raise RuntimeError(f"lookup broke on {token}")

    with monkeypatch.context() as patched:
        patched.setattr(receiver, "_lookup", broken)
        response = await post(client, body(task()), config.token)
    assert response.status_code == 500
    assert response.json() == {
        "error": "push_receiver_error",
        "message": "The receiver could not take the notification.",
    }
    assert [r.getMessage() for r in caplog.records if r.name == "llamon_agent.client.push"] == [
        "push notification failed unexpectedly: RuntimeError"
    ]
    assert (await post(client, body(task()), config.token)).status_code == 200


async def test_an_unreachable_jwks_url_refuses_the_post(
    caplog: pytest.LogCaptureFixture,
) -> None:
    receiver, client, token = await signed_receiver(jwks_url="http://127.0.0.1:9/jwks.json")
    content = body(task())
    async with client:
        response = await client.post(
            "/a2a/push",
            content=content,
            headers={HEADER: token, "Authorization": signed(content)},
        )
    assert (response.status_code, response.json()["error"]) == (401, "push_signature_invalid")
    assert "push signing keys could not be read from the JWKS URL: ConnectError" in caplog.text
    assert receiver.current("t1") is None
