"""Receive the push notifications of tasks you started on another agent, and wait on them.

``push_receiver(url)`` makes a ``PushReceiver``: a Starlette endpoint that accepts the
``POST``s an A2A server sends (the whole ``Task`` as JSON), and ``await
receiver.wait(task_id)`` that resolves when one of them brings the task to a terminal or
paused state::

    receiver = push_receiver("https://me.example.com/a2a/push")
    app.router.routes.extend(receiver.routes)      # or serve receiver.app
    result = await agent.start("Summarise the report", push=receiver)
    result = await receiver.wait(result.task_id, timeout=600)

Every registration (``receiver.register()``, done for you by ``AgentClient.start`` and
``AgentClient.register_push``) gets its own token (``secrets.token_urlsafe``, unless you
give one); the server sends it back in ``X-A2A-Notification-Token``. A POST is accepted
only when:

* the token is one the receiver handed out and has not retired (compared in constant
  time); else **401** (``push_token_required`` / ``push_token_invalid``);
* with ``jwt_key=`` / ``jwks_url=``: ``Authorization: Bearer <JWT>`` is signed by that key
  (an algorithm of ``jwt_algorithms``), its ``iat`` is at most ``jwt_max_age`` seconds old
  (and not in the future), and its ``request_body_sha256`` matches the body; else **401**
  (``push_signature_required`` / ``push_signature_invalid``);
* the body is at most ``max_body_bytes`` (else **413** ``push_body_too_large``) and is an
  A2A ``Task`` (else **400** ``push_body_invalid``);
* the task is the one the token was registered for (the first accepted POST binds a token
  given before the task existed); else **403** ``push_task_mismatch``.

A refused POST gets ``{"error": <name>, "message": <text>}`` (never a token, a key or
anything of the request) and resolves nothing; the next POST is judged on its own. An
accepted one gets 200 ``{"status": "received"}`` at once. Nothing a request sends can
raise into the server (a failure of the receiver itself answers 500
``push_receiver_error``, logged at ERROR by its type only). At most ``max_pending``
registrations are open at a time (a task is retired when ``wait`` hands back its
terminal state, or by ``forget``); memory does not grow with what strangers send.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import httpx
from a2a.types import (
    Message,
    MessageSendConfiguration,
    MessageSendParams,
    PushNotificationConfig,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from llamon_agent.client.errors import RemoteTimeoutError, remote_error_from_task
from llamon_agent.client.push_jwt import DEFAULT_JWT_ALGORITHMS, JwtVerifier, SignatureRefused
from llamon_agent.client.result import RemoteResult

if TYPE_CHECKING:
    from llamon_agent.client.agent_client import AgentClient
    from llamon_agent.client.retry import RetryPolicy

__all__ = [
    "DEFAULT_JWT_ALGORITHMS",
    "TOKEN_HEADER",
    "PushReceiver",
    "PushReceiverFullError",
    "push_receiver",
]

logger = logging.getLogger("llamon_agent.client.push")

TOKEN_HEADER: Final = "X-A2A-Notification-Token"  # noqa: S105 - a header name
"""The header an A2A server puts the registration's token in."""

_TERMINAL: Final = frozenset(
    {TaskState.completed, TaskState.failed, TaskState.canceled, TaskState.rejected}
)
_PAUSED: Final = frozenset({TaskState.input_required, TaskState.auth_required})
_FAILED: Final = frozenset({TaskState.failed, TaskState.rejected})

_REFUSALS: Final[Mapping[str, tuple[int, str]]] = {
    "push_token_required": (401, f"This webhook requires the {TOKEN_HEADER} header."),
    "push_token_invalid": (401, "The notification token is not valid."),
    "push_signature_required": (
        401,
        "This webhook requires a signed JWT in the 'Authorization: Bearer' header.",
    ),
    "push_signature_invalid": (401, "The notification's signature is not valid."),
    "push_body_too_large": (413, "The notification body is too large."),
    "push_body_invalid": (400, "The notification body is not an A2A Task as JSON."),
    "push_task_mismatch": (403, "This token was not registered for this task."),
}
"""Every answer the receiver refuses a POST with: error name -> (HTTP status, message)."""


class PushReceiverFullError(RuntimeError):
    """``max_pending`` registrations are open already: wait on (or ``forget``) one first."""


@dataclass(eq=False)
class _Registration:
    """One token handed out, and what arrived for its task."""

    token: str
    task_id: str | None
    agent: str | None
    latest: Task | None = None  # the terminal or paused state not yet handed to ``wait``
    current: Task | None = None  # the latest state received, whatever it is
    done: bool = False  # a terminal state arrived: later POSTs are acknowledged, ignored
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


class _Refused(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class PushReceiver:
    """Accepts push notifications for the tasks registered with it; see the module doc.

    ``url`` is the address the called agent POSTs to (as it reaches you); ``app`` serves
    its path, ``routes`` lets you mount the same endpoint into your own Starlette app, and
    ``serve(host, port)`` runs ``app`` with uvicorn in the current event loop. ``wait``
    and the endpoint must run in the same event loop.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        path: str | None = None,
        max_pending: int = 1000,
        max_body_bytes: int = 4 * 1024 * 1024,
        jwt_key: Any = None,
        jwks_url: str | None = None,
        jwt_algorithms: Sequence[str] = DEFAULT_JWT_ALGORITHMS,
        jwt_max_age: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_pending < 1:
            raise ValueError("max_pending must be at least 1")
        self.url = url
        self.path = path or (httpx.URL(url).path if url else "/") or "/"
        self.max_pending = max_pending
        self.max_body_bytes = max_body_bytes
        self.jwt_algorithms = tuple(jwt_algorithms)
        self.jwt_max_age = jwt_max_age
        self._clock = clock
        self._by_digest: dict[bytes, _Registration] = {}
        self._by_task: dict[str, _Registration] = {}
        self._verifier = (
            JwtVerifier(jwt_key, jwks_url, self.jwt_algorithms, max_age=jwt_max_age)
            if jwt_key is not None or jwks_url is not None
            else None
        )
        self.routes = [Route(self.path, self._endpoint, methods=["POST"])]
        self.app = Starlette(routes=self.routes)

    def __repr__(self) -> str:
        signed = ", signed" if self._verifier is not None else ""
        return f"PushReceiver(path={self.path!r}, open={self.pending}{signed})"

    @property
    def pending(self) -> int:
        """How many registrations are open (handed out and not yet retired)."""
        return len(self._by_digest)

    def register(
        self, task_id: str | None = None, *, token: str | None = None, agent: str | None = None
    ) -> PushNotificationConfig:
        """A new registration: the ``PushNotificationConfig`` (this receiver's ``url``, a
        fresh token, its own config ``id`` so it never replaces another receiver's config
        on the same task) to send to the agent. ``task_id`` binds it to an existing task; without
        one, the first accepted notification (or ``bind``) names the task. ``agent`` is the
        name failures raised by ``wait`` carry. Raises ``PushReceiverFullError`` when
        ``max_pending`` registrations are open, ``ValueError`` when ``url`` is unknown or a
        given token is empty or already in use."""
        if not self.url:
            raise ValueError("the receiver's url is not known yet: give url= or use serve()")
        if len(self._by_digest) >= self.max_pending:
            raise PushReceiverFullError(
                f"the push receiver holds {self.max_pending} open registrations; "
                "wait on or forget one first"
            )
        token = secrets.token_urlsafe(32) if token is None else token
        if not token.strip():
            raise ValueError("a push token must not be empty")
        digest = _digest(token)
        if digest in self._by_digest:
            raise ValueError("this push token is already registered")
        if task_id is not None and task_id in self._by_task:
            raise ValueError(f"task {task_id!r} is already registered with this receiver")
        registration = _Registration(token=token, task_id=task_id, agent=agent)
        self._by_digest[digest] = registration
        if task_id is not None:
            self._by_task[task_id] = registration
        return PushNotificationConfig(id=secrets.token_hex(8), url=self.url, token=token)

    def bind(self, config: PushNotificationConfig, task: Task) -> None:
        """Tie ``config`` (from ``register``) to ``task``, the task the agent answered
        with; a terminal or paused ``task`` resolves ``wait`` as a notification would."""
        registration = self._lookup(config.token)
        if registration is None:
            return
        if registration.task_id is None:
            self._bind(registration, task.id)
        if registration.task_id == task.id:
            self._record(registration, task)

    def forget(self, task_id_or_config: str | PushNotificationConfig) -> None:
        """Retire a registration (by task id, or the config ``register`` returned): its
        token is refused from now on and a ``wait`` on it stops waiting."""
        if isinstance(task_id_or_config, PushNotificationConfig):
            registration = self._lookup(task_id_or_config.token)
        else:
            registration = self._by_task.get(task_id_or_config)
        if registration is not None:
            self._retire(registration)

    def current(self, task_id: str) -> Task | None:
        """The latest state a notification brought for ``task_id`` (None: none yet)."""
        registration = self._by_task.get(task_id)
        return None if registration is None else registration.current

    async def wait(
        self,
        task_id: str,
        *,
        timeout: float | None = 300.0,  # noqa: ASYNC109 - the wait's own bound, typed on expiry
    ) -> RemoteResult:
        """Wait until a notification brings ``task_id`` to a terminal or paused state.

        Returns its ``RemoteResult`` (``completed``, ``canceled``, or ``needs_input``:
        answer with ``AgentClient.resume``, then wait again); a ``failed`` or ``rejected``
        task raises the ``RemoteAgentError`` family, as ``AgentClient.send`` does. A
        terminal state retires the registration. No notification in ``timeout`` seconds
        raises ``RemoteTimeoutError`` (``push_wait_timeout``; the registration stays, so you
        may wait again or ``AgentClient.get`` the task). A task never registered raises
        ``LookupError``.
        """
        registration = self._by_task.get(task_id)
        if registration is None:
            raise LookupError(f"task {task_id!r} is not registered with this push receiver")
        try:
            async with asyncio.timeout(timeout):
                while registration.latest is None:
                    if self._by_task.get(task_id) is not registration:
                        raise LookupError(f"task {task_id!r} was forgotten while waiting")
                    registration.arrived.clear()
                    await registration.arrived.wait()
        except TimeoutError:
            raise RemoteTimeoutError(
                f"no push notification ended task {task_id!r} within {timeout} s",
                reason="push_wait_timeout",
                retriable=True,
                task_id=task_id,
                agent=registration.agent,
            ) from None
        task = registration.latest
        registration.latest = None
        if task.status.state in _TERMINAL:
            self._retire(registration)
        if task.status.state in _FAILED:
            raise remote_error_from_task(task, agent=registration.agent)
        return RemoteResult.from_task(task)

    @asynccontextmanager
    async def serve(self, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[PushReceiver]:
        """Run ``app`` with uvicorn on ``host:port`` in this event loop while inside.

        ``port=0`` takes a free port; when the receiver has no ``url``, it becomes
        ``http://<host>:<port><path>`` (give ``url`` when the agent reaches you through
        another address)."""
        import uvicorn

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        if not self.url:
            bound = sock.getsockname()[1]
            shown = f"[{host}]" if family == socket.AF_INET6 else host
            self.url = f"http://{shown}:{bound}{self.path}"
        server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="off"))
        running = asyncio.create_task(server.serve(sockets=[sock]))
        try:  # the socket already listens: a POST sent now waits in its backlog
            yield self
        finally:
            server.should_exit = True
            await asyncio.wait_for(running, timeout=10)
            sock.close()

    # -- the endpoint -------------------------------------------------------------------

    async def _endpoint(self, request: Request) -> JSONResponse:
        try:
            registration, task = await self._accept(request)
        except _Refused as refused:
            status, message = _REFUSALS[refused.name]
            logger.info("push notification refused: %s", refused.name)
            return JSONResponse({"error": refused.name, "message": message}, status_code=status)
        except Exception as exc:  # its text may hold what was sent: only the type is logged
            logger.error("push notification failed unexpectedly: %s", type(exc).__name__)
            return JSONResponse(
                {
                    "error": "push_receiver_error",
                    "message": "The receiver could not take the notification.",
                },
                status_code=500,
            )
        self._record(registration, task)
        return JSONResponse({"status": "received"})

    async def _accept(self, request: Request) -> tuple[_Registration, Task]:
        token = request.headers.get(TOKEN_HEADER)
        if not token:
            raise _Refused("push_token_required")
        registration = self._lookup(token)
        if registration is None:
            raise _Refused("push_token_invalid")
        body = await self._body(request)
        if self._verifier is not None:
            authorization = request.headers.get("authorization")
            try:
                await self._verifier.verify(authorization, body, now=self._clock())
            except SignatureRefused as refused:
                raise _Refused(refused.name) from None
        try:
            task = Task.model_validate_json(body)
        except (ValidationError, ValueError):
            raise _Refused("push_body_invalid") from None
        if self._lookup(token) is not registration:  # retired while the body was read
            raise _Refused("push_token_invalid")
        if registration.task_id is None:
            if task.id in self._by_task:
                raise _Refused("push_task_mismatch")
            self._bind(registration, task.id)
        elif registration.task_id != task.id:
            raise _Refused("push_task_mismatch")
        return registration, task

    async def _body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise _Refused("push_body_too_large")
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.max_body_bytes:
                    raise _Refused("push_body_too_large")
                chunks.append(chunk)
        except ClientDisconnect:
            raise _Refused("push_body_invalid") from None
        return b"".join(chunks)

    # -- bookkeeping --------------------------------------------------------------------

    def _lookup(self, token: str | None) -> _Registration | None:
        if not token:
            return None
        registration = self._by_digest.get(_digest(token))
        if registration is None or not hmac.compare_digest(
            registration.token.encode("utf-8", "surrogatepass"),
            token.encode("utf-8", "surrogatepass"),
        ):
            return None
        return registration

    def _bind(self, registration: _Registration, task_id: str) -> None:
        registration.task_id = task_id
        self._by_task[task_id] = registration

    def _record(self, registration: _Registration, task: Task) -> None:
        if registration.done:
            return
        registration.current = task
        state = task.status.state
        if state in _TERMINAL or state in _PAUSED:
            registration.done = state in _TERMINAL
            registration.latest = task
            registration.arrived.set()
        elif registration.latest is not None:  # a pause nobody waited on: the task moved on
            registration.latest = None

    def _retire(self, registration: _Registration) -> None:
        self._by_digest.pop(_digest(registration.token), None)
        if registration.task_id is not None and (
            self._by_task.get(registration.task_id) is registration
        ):
            del self._by_task[registration.task_id]
        registration.arrived.set()  # a waiter re-checks and sees it forgotten


def push_receiver(
    url: str | None = None,
    *,
    path: str | None = None,
    max_pending: int = 1000,
    max_body_bytes: int = 4 * 1024 * 1024,
    jwt_key: Any = None,
    jwks_url: str | None = None,
    jwt_algorithms: Sequence[str] = DEFAULT_JWT_ALGORITHMS,
    jwt_max_age: float = 300.0,
    clock: Callable[[], float] = time.time,
) -> PushReceiver:
    """A ``PushReceiver`` for notifications POSTed to ``url`` (see ``PushReceiver``).

    ``path`` overrides the route's path (default: ``url``'s path). ``jwt_key`` (a public
    key, a JWK or a JWKS mapping) or ``jwks_url`` turn on JWT verification (PyJWT, the
    ``jwt`` extra); ``clock`` gives the time ``iat`` is compared with.
    """
    return PushReceiver(
        url,
        path=path,
        max_pending=max_pending,
        max_body_bytes=max_body_bytes,
        jwt_key=jwt_key,
        jwks_url=jwks_url,
        jwt_algorithms=jwt_algorithms,
        jwt_max_age=jwt_max_age,
        clock=clock,
    )


# -- registration through AgentClient (AgentClient.start / .register_push call these) -----


async def start_with_push(
    client: AgentClient,
    message: Message,
    receiver: PushReceiver,
    *,
    skill: str | None,
    context_id: str | None,
    retry: RetryPolicy | None = None,
) -> RemoteResult:
    """``AgentClient.start``: a non-blocking ``message/send`` carrying the receiver's
    registration, retried like ``send`` (the same ``messageId``); the task as the agent
    first answered it."""
    card = await client.card()
    client.check(card, message, skill)
    _check_push_declared(card.name, card.capabilities.push_notifications)
    config = receiver.register(agent=card.name)
    params = MessageSendParams(
        message=message,
        configuration=MessageSendConfiguration(blocking=False, push_notification_config=config),
    )
    try:
        card, answer = await client._call(
            "message/send",
            lambda transport, context: transport.send_message(params, context=context),
            retry=retry,
            idempotent=True,
            context_id=context_id,
        )
    except BaseException:
        receiver.forget(config)
        raise
    if isinstance(answer, Message):
        receiver.forget(config)
        return RemoteResult.from_message(answer)
    receiver.bind(config, answer)
    if answer.status.state in _FAILED:
        receiver.forget(config)
        raise remote_error_from_task(answer, agent=card.name)
    return RemoteResult.from_task(answer)


async def register_push(
    client: AgentClient,
    task_id: str,
    receiver: PushReceiver,
    *,
    retry: RetryPolicy | None = None,
) -> PushNotificationConfig:
    """``AgentClient.register_push``: ``tasks/pushNotificationConfig/set`` for a task
    (retried: setting the same config twice is setting it once)."""
    card = await client.card()
    _check_push_declared(card.name, card.capabilities.push_notifications)
    config = receiver.register(task_id, agent=card.name)
    request = TaskPushNotificationConfig(task_id=task_id, push_notification_config=config)
    try:
        await client._call(
            "tasks/pushNotificationConfig/set",
            lambda transport, context: transport.set_task_callback(request, context=context),
            retry=retry,
            idempotent=True,
            task_id=task_id,
        )
    except BaseException:
        receiver.forget(config)
        raise
    return config


def _check_push_declared(agent: str, declared: bool | None) -> None:
    from llamon_agent.client.agent_client import CardMismatchError

    if not declared:
        raise CardMismatchError(
            f"agent {agent!r} does not declare push notifications in its card "
            "(capabilities.pushNotifications)"
        )
