"""Serving an agent over A2A: the Starlette app, and ``serve`` for the command line.

``create_app(agent, card, ...)`` builds a2a-sdk's JSON-RPC application around
``CustomAgentExecutor`` and ``LlamonRequestHandler``; the card is served at
``/.well-known/agent-card.json`` and the older ``/.well-known/agent.json``. Every JSON-RPC
error the app itself produces (parse errors, unknown methods, bad params, unexpected
exceptions) carries ``ProtocolErrorData`` and a message that never repeats exception text.
Building an app installs log scrubbing (``core.logs``) for the libraries underneath.
"""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

from a2a.extensions.common import HTTP_EXTENSION_HEADER
from a2a.server.apps import A2AStarletteApplication
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.server.tasks import PushNotificationConfigStore, TaskStore
from a2a.types import (
    A2AError,
    A2ARequest,
    AgentCard,
    AgentExtension,
    DeleteTaskPushNotificationConfigRequest,
    DeleteTaskPushNotificationConfigResponse,
    GetAuthenticatedExtendedCardRequest,
    GetAuthenticatedExtendedCardResponse,
    GetTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigResponse,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    JSONRPCError,
    JSONRPCErrorResponse,
    ListTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigResponse,
    SendStreamingMessageRequest,
    SendStreamingMessageResponse,
    SetTaskPushNotificationConfigRequest,
    SetTaskPushNotificationConfigResponse,
)
from a2a.utils.errors import ServerError
from pydantic import BaseModel
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from llamon_agent.a2a.auth import AuthConfig, AuthMiddleware
from llamon_agent.a2a.body import (
    ReadRequest,
    ambiguous_length_refusal,
    body_too_large,
    parse_body,
    read_body,
)
from llamon_agent.a2a.card import auth_spec_from_card, mode_problems
from llamon_agent.a2a.console import (
    CONSOLE_PATH,
    ConsoleOptions,
    ConsoleSources,
    console_routes_for,
    served_event_reader,
)
from llamon_agent.a2a.events_route import TaskEventLog, task_events_route
from llamon_agent.a2a.executor import CustomAgentExecutor
from llamon_agent.a2a.handler import LlamonRequestHandler
from llamon_agent.a2a.health import health_routes
from llamon_agent.a2a.params import check_params, validation_refusal
from llamon_agent.a2a.protocol import (
    RequestLimits,
    extended_card_not_configured,
    push_not_supported,
    streaming_not_supported,
    with_protocol_data,
)
from llamon_agent.a2a.push import BackgroundPushSender, PolicyCheckedConfigStore
from llamon_agent.a2a.push_policy import PushPolicy
from llamon_agent.a2a.sdk_spans import SdkJSONRPCHandler
from llamon_agent.a2a.sent import DEFAULT_WINDOW
from llamon_agent.a2a.stores import memory_stores
from llamon_agent.a2a.stores.failures import FailureStore
from llamon_agent.a2a.stores.task_events import TaskEventStore
from llamon_agent.client.extensions import IDEMPOTENT_SEND_EXTENSION
from llamon_agent.core.events import EventBus
from llamon_agent.core.faults import FAULTS_EXTENSION_URI, FAULTS_METADATA_KEY
from llamon_agent.core.logs import install_log_scrubbing
from llamon_agent.core.settings import idempotency_window_setting, push_allow_setting
from llamon_agent.core.telemetry import span_event_subscriber

if TYPE_CHECKING:
    from llamon_agent.a2a.liveness import Liveness
    from llamon_agent.a2a.relay import EventRelay

__all__ = ["GC_THRESHOLDS", "LlamonA2AApplication", "create_app", "freeze_startup_heap"]

logger = logging.getLogger("llamon_agent.a2a")


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC 2.0 reply: ``id`` always present (``null`` when the request's is not
    known) and exactly one of ``result``/``error`` (``"result": null`` for a method that
    returns nothing, such as ``tasks/pushNotificationConfig/delete``)."""
    body.setdefault("id", None)
    if "error" not in body:
        body.setdefault("result", None)
    return body


class _ClientMistakeFilter(logging.Filter):
    """Drops a2a-sdk's ERROR traceback for a request its models refuse.

    That traceback holds the request's values (pydantic's ``input_value``), and the
    mistake is the client's: the reply names the field path, and a2a-sdk's WARNING line
    ("Request Error ...") still records the refusal without the values.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != "Failed to validate base JSON-RPC request"


_A2A_APP_LOGGER: Final = logging.getLogger("a2a.server.apps.jsonrpc.jsonrpc_app")


def _quiet_client_mistakes() -> None:
    """Install ``_ClientMistakeFilter`` on a2a-sdk's JSON-RPC app logger (once)."""
    if not any(isinstance(f, _ClientMistakeFilter) for f in _A2A_APP_LOGGER.filters):
        _A2A_APP_LOGGER.addFilter(_ClientMistakeFilter())


def _closing(response: Response) -> Response:
    """``response`` with ``Connection: close``: the server reads no more of this request."""
    response.headers["connection"] = "close"
    return response


def _dump(response: BaseModel) -> dict[str, Any]:
    return _reply(response.model_dump(mode="json", exclude_none=True))


class _LlamonJSONRPCHandler(SdkJSONRPCHandler):
    """a2a-sdk's JSON-RPC dispatch with the answers for what the card does not declare.

    All four push-config methods answer -32003 on a card without push (a2a-sdk answers
    ``set`` with an unsupported-operation error raised past its own error handling, and
    the other three with -32004); the extended card answers -32007 on a card without one;
    ``message/stream`` answers -32004 on a card without streaming. None logs an ERROR.
    """

    def on_message_send_stream(
        self, request: SendStreamingMessageRequest, context: ServerCallContext | None = None
    ) -> AsyncIterable[SendStreamingMessageResponse]:
        if not self.agent_card.capabilities.streaming:
            raise streaming_not_supported()
        stream: AsyncIterable[SendStreamingMessageResponse]
        stream = super().on_message_send_stream(request, context)
        return stream

    def _push_declared(self) -> bool:
        return bool(self.agent_card.capabilities.push_notifications)

    async def set_push_notification_config(
        self,
        request: SetTaskPushNotificationConfigRequest,
        context: ServerCallContext | None = None,
    ) -> SetTaskPushNotificationConfigResponse:
        if not self._push_declared():
            raise push_not_supported()
        response: SetTaskPushNotificationConfigResponse
        response = await super().set_push_notification_config(request, context)
        return response

    async def get_push_notification_config(
        self,
        request: GetTaskPushNotificationConfigRequest,
        context: ServerCallContext | None = None,
    ) -> GetTaskPushNotificationConfigResponse:
        if not self._push_declared():
            raise push_not_supported()
        return await super().get_push_notification_config(request, context)

    async def list_push_notification_config(
        self,
        request: ListTaskPushNotificationConfigRequest,
        context: ServerCallContext | None = None,
    ) -> ListTaskPushNotificationConfigResponse:
        if not self._push_declared():
            raise push_not_supported()
        return await super().list_push_notification_config(request, context)

    async def delete_push_notification_config(
        self,
        request: DeleteTaskPushNotificationConfigRequest,
        context: ServerCallContext | None = None,
    ) -> DeleteTaskPushNotificationConfigResponse:
        if not self._push_declared():
            raise push_not_supported()
        return await super().delete_push_notification_config(request, context)

    async def get_authenticated_extended_card(
        self,
        request: GetAuthenticatedExtendedCardRequest,
        context: ServerCallContext | None = None,
    ) -> GetAuthenticatedExtendedCardResponse:
        if not self.agent_card.supports_authenticated_extended_card:
            raise extended_card_not_configured()
        return await super().get_authenticated_extended_card(request, context)


class LlamonA2AApplication(A2AStarletteApplication):
    """a2a-sdk's Starlette JSON-RPC app whose answers clients can parse.

    * Every JSON-RPC error carries ProtocolErrorData; invalid params name the field path.
    * Every reply has ``id`` (``null`` when the request's is missing or unusable) and
      exactly one of ``result``/``error``.
    * The body is read within ``limits`` (``RequestLimits``: bytes counted as they
      arrive, nesting depth, 64-bit integers, strict UTF-8) and parsed once
      (``a2a.body``); a request with both Content-Length and Transfer-Encoding is
      refused unread. A refusal that leaves body unread closes the connection.
    * Input a2a-sdk's models let through is refused before any handler runs, for every
      method (``params.find_lone_surrogate``, ``params.check_params``).
    * A ``ServerError`` raised by a2a-sdk's dispatch itself (a capability the card does
      not declare) is answered as that error, not as -32603.
    """

    def __init__(
        self,
        agent_card: AgentCard,
        http_handler: RequestHandler,
        *,
        limits: RequestLimits | None = None,
        **kwargs: Any,
    ) -> None:
        self.limits = limits or RequestLimits()
        kwargs.setdefault("max_content_length", self.limits.max_body_bytes)
        super().__init__(agent_card, http_handler, **kwargs)
        self.handler = _LlamonJSONRPCHandler(
            agent_card=agent_card,
            request_handler=http_handler,
            extended_agent_card=self.extended_agent_card,
            extended_card_modifier=self.extended_card_modifier,
        )

    async def _handle_requests(self, request: Request) -> Response:
        ambiguous = ambiguous_length_refusal(request.headers)
        if ambiguous is not None:
            return _closing(self._error_reply(None, ambiguous))
        try:
            body = await read_body(request, self.limits)
        except ClientDisconnect:  # nobody is left to answer
            return Response(status_code=400)
        if body is None:  # over the limit: the rest is never read
            return _closing(self._error_reply(None, body_too_large(self.limits)))
        document, refusal = parse_body(body, self.limits)
        if refusal is not None:
            request_id, error = refusal
            return self._error_reply(request_id, error)
        # parsed once here: a2a-sdk's request.json() returns this document
        return await super()._handle_requests(ReadRequest(request, body, document))

    def _error_reply(self, request_id: str | int | None, error: ServerError) -> JSONResponse:
        """The JSON-RPC error reply for a refusal (no log line: it is the caller's input)."""
        inner = with_protocol_data(error).error or InternalError()
        return JSONResponse(_dump(JSONRPCErrorResponse(id=request_id, error=inner)))

    async def _process_non_streaming_request(
        self, request_id: str | int | None, a2a_request: A2ARequest, context: ServerCallContext
    ) -> Response:
        problem = check_params(getattr(a2a_request.root, "params", None))
        if problem is not None:
            return self._error_reply(request_id, problem)
        try:
            return await super()._process_non_streaming_request(request_id, a2a_request, context)
        except ServerError as exc:
            return self._error_reply(request_id, exc)

    async def _process_streaming_request(
        self, request_id: str | int | None, a2a_request: A2ARequest, context: ServerCallContext
    ) -> Response:
        try:
            problem = check_params(getattr(a2a_request.root, "params", None))
            if problem is not None:
                raise problem
            return await super()._process_streaming_request(request_id, a2a_request, context)
        except ServerError as exc:
            inner = with_protocol_data(exc).error or InternalError()
            event = _dump(JSONRPCErrorResponse(id=request_id, error=inner))

            async def one_event() -> AsyncIterator[dict[str, str]]:
                yield {"data": json.dumps(event, separators=(",", ":"))}

            return EventSourceResponse(one_event())

    def _create_response(self, context: ServerCallContext, handler_result: Any) -> Response:
        if isinstance(handler_result, AsyncGenerator):
            return super()._create_response(context, handler_result)
        model = (
            handler_result
            if isinstance(handler_result, JSONRPCErrorResponse)
            else handler_result.root
        )
        headers: dict[str, str] = {}
        if extensions := context.activated_extensions:
            headers[HTTP_EXTENSION_HEADER] = ", ".join(sorted(extensions))
        return JSONResponse(_dump(model), headers=headers)

    def _generate_error_response(
        self, request_id: str | int | None, error: JSONRPCError | A2AError
    ) -> JSONResponse:
        inner = error.root if isinstance(error, A2AError) else error
        if isinstance(inner, InvalidParamsError | InvalidRequestError) and isinstance(
            inner.data, list
        ):
            inner = validation_refusal(inner.data).error or inner
        completed = with_protocol_data(ServerError(error=inner)).error or inner
        wrapped = completed if isinstance(completed, JSONRPCError) else A2AError(root=completed)
        response = super()._generate_error_response(request_id, wrapped)
        body = json.loads(bytes(response.body))
        return JSONResponse(_reply(body), status_code=response.status_code)


def _check_auth_matches_card(card: AgentCard, auth: AuthConfig | None) -> None:
    spec = auth_spec_from_card(card)
    if spec is None and auth is None:
        return
    if spec is None:
        raise ValueError(
            "auth is configured but the agent card declares no security scheme; build the "
            "card with auth=AuthSpec.api_key()/bearer() so callers know how to authenticate"
        )
    if auth is None:
        raise ValueError(
            f"the agent card requires {spec.kind} auth (header {spec.header!r}) but no "
            "AuthConfig was given; pass auth=AuthConfig.from_card(card, secret)"
        )
    if (auth.scheme, auth.header.lower()) != (spec.kind, spec.header.lower()):
        raise ValueError(
            f"auth checks {auth.scheme} in {auth.header!r} but the card declares "
            f"{spec.kind} in {spec.header!r}"
        )


def _check_card_is_servable(
    card: AgentCard, auth: AuthConfig | None, extended_card: AgentCard | None
) -> None:
    """``ValueError`` for a card no request could be served well with."""
    problems = mode_problems(card)
    if problems:
        listed = "; ".join(f"{problem.path}: {problem.message}" for problem in problems)
        raise ValueError(
            f"the agent card's modes must be MIME types, or every message is refused: {listed}"
        )
    declared = bool(card.supports_authenticated_extended_card)
    if extended_card is not None and not declared:
        raise ValueError(
            "extended_card was given but the agent card does not declare it; build the card "
            "with build_agent_card(..., authenticated_extended_card=True)"
        )
    if declared and auth is None:
        raise ValueError(
            "an authenticated extended card is served only to authenticated callers; "
            "pass auth=AuthConfig.from_card(card, secret)"
        )


GC_THRESHOLDS: Final = (20_000, 50, 100)
"""The collector's thresholds a server sets at startup when the process still has the
interpreter's defaults ``(700, 10, 10)``."""

_DEFAULT_GC_THRESHOLDS: Final = (700, 10, 10)


def freeze_startup_heap() -> None:
    """Once per process: collect garbage, then move every object alive now (modules, the
    app, caches) to the collector's permanent generation, and raise the collector's
    thresholds to ``GC_THRESHOLDS`` if they are still the interpreter's defaults
    (thresholds the process set itself are kept). Later calls do nothing.

    Full collections otherwise walk that whole heap -- tens of milliseconds on a 2-core
    machine, landing on whichever request is running. Objects frozen here are never
    examined for cycles again; ones freed by reference counting are still freed. With
    1,000 open streams the heap they hold makes each full pass take hundreds of
    milliseconds, and the default thresholds ran one every few seconds: every stream's next
    chunk waited for it. The raised thresholds collect cyclic garbage less often (every
    20,000 allocations instead of 700; full passes still follow, less often), so memory
    stays bounded.
    """
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()
        if gc.get_threshold() == _DEFAULT_GC_THRESHOLDS:
            gc.set_threshold(*GC_THRESHOLDS)


def _declaring_idempotent_sends(card: AgentCard, window: float) -> AgentCard:
    """The served card: with the idempotent-send extension (``IDEMPOTENT_SEND_EXTENSION``,
    ``params.windowSeconds``) when repeats are answered (a window above 0), so a client
    knows it may send a message again to learn its task (and cancel it)."""
    extensions = [
        ext for ext in card.capabilities.extensions or [] if ext.uri != IDEMPOTENT_SEND_EXTENSION
    ]
    if window > 0:
        extensions.append(
            AgentExtension(
                uri=IDEMPOTENT_SEND_EXTENSION,
                description=(
                    "a repeated messageId is answered with the task it started or continued"
                ),
                params={"windowSeconds": window},
            )
        )
    capabilities = card.capabilities.model_copy(update={"extensions": extensions or None})
    return card.model_copy(update={"capabilities": capabilities})


def _declaring_fault_injection(card: AgentCard) -> AgentCard:
    """The served card, declaring that fault plans in request metadata are applied."""
    extensions = [
        ext for ext in card.capabilities.extensions or [] if ext.uri != FAULTS_EXTENSION_URI
    ]
    extensions.append(
        AgentExtension(
            uri=FAULTS_EXTENSION_URI,
            description="a fault plan in the request's metadata is applied (Quality Lab runs)",
        )
    )
    capabilities = card.capabilities.model_copy(update={"extensions": extensions})
    return card.model_copy(update={"capabilities": capabilities})


def create_app(
    agent: object,
    card: AgentCard,
    *,
    task_store: TaskStore | None = None,
    push_config_store: PushNotificationConfigStore | None = None,
    limits: RequestLimits | None = None,
    auth: AuthConfig | None = None,
    extended_card: AgentCard | None = None,
    executor: CustomAgentExecutor | None = None,
    on_shutdown: Callable[[], Any] | None = None,
    gc_freeze: bool = True,
    push_policy: PushPolicy | None = None,
    idempotency_window: float | None = None,
    failure_store: FailureStore | None = None,
    events: EventBus | None = None,
    metrics: bool = False,
    event_store: TaskEventStore | None = None,
    span_events: bool = True,
    console: ConsoleOptions | None = None,
    allow_fault_injection: bool = False,
    redis_url: str | None = None,
    heartbeat: float | None = None,
    worker_lease: float | None = None,
) -> Starlette:
    """The A2A Starlette app for ``agent`` (anything ``as_agent`` accepts) and its card.

    Stores default to the bounded in-memory ones here (``memory_stores()``: finished tasks
    evicted past 10 000 or an hour); ``serve`` opens the embedded SQLite default.
    ``limits.input_modes`` defaults to the card's ``defaultInputModes``. Push notifications
    are accepted and sent only when the card declares the capability. ``auth`` must match
    what the card declares (``AuthConfig.from_card(card, key)``): a card that asks for
    credentials is never served open, and a server that checks credentials says so in its
    card; a mismatch raises ``ValueError``. ``extended_card`` is what authenticated callers
    get from ``agent/getAuthenticatedExtendedCard``; it needs auth and a card that declares
    it (a declaring card without ``extended_card`` serves itself there; a card that does not
    declare one answers -32007). A card whose modes are not MIME types
    (``"text"`` for ``text/plain``) raises ``ValueError`` saying what to write.
    ``gc_freeze`` (default on): at startup, once per process, ``gc.collect();
    gc.freeze()``, so the garbage collector's full passes under load walk only what
    requests create, not the startup heap (p99 at 16 concurrent sends on SQLite:
    ~95-130 ms -> ~35-45 ms, bench/README.md); the collector's thresholds, if still the
    interpreter's defaults, are raised to ``GC_THRESHOLDS`` (``freeze_startup_heap``).
    ``GET /healthz`` and ``GET /readyz`` (200, or 503 when the task store does not answer)
    need no credentials (``a2a.health``).
    ``push_policy``: which webhook URLs are accepted (``PushPolicy``; by default http(s)
    to public addresses only, plus the networks in ``LLAMON_PUSH_ALLOW``); a refused URL
    is answered -32602 ``push_url_refused`` when set, and checked again after DNS at each
    delivery. Notifications are POSTed in the background (``BackgroundPushSender``,
    ``app.state.llamon_push_sender``), never on the caller's request.
    ``idempotency_window``: seconds a repeated send (the same caller's ``messageId`` in
    the same context) is answered with the task it started instead of running again
    (``llamon_agent.a2a.sent``); ``None``: ``LLAMON_IDEMPOTENCY_WINDOW``, else 24 h;
    ``0``: off. A bad value raises ``ValueError``. ``app.state.llamon_sent_messages``
    holds them.
    ``failure_store``: where every failed task's failure is kept, with the card's name as
    its agent (``stores.failures``; default a bounded one in memory);
    ``app.state.llamon_failure_store`` holds it.
    ``events``: the ``EventBus`` the tasks' runner events go to (the executor's, and the
    loop, flow and MCP events of the agent inside each task); it also serves
    ``GET /tasks/{id}/events`` (SSE, ``a2a.events_route``), whose ``TaskEventLog``
    (``app.state.llamon_task_events``) subscribes to it. ``None``: no events, no route.
    ``event_store``: where the tasks' events are kept (``stores.events``, read by
    ``llamon task ID``); it subscribes to ``events`` (a bus is made when none is given;
    its own bounded queue, batched writes in the background) and is flushed when the
    server stops;
    ``app.state.llamon_event_store`` holds it. ``span_events`` (default on): with
    ``events``, each runner event is also added as an OpenTelemetry span event on the span
    it was emitted in (``core.telemetry.span_event_subscriber``; nothing without an SDK).
    ``metrics``: serve ``GET /metrics``, the OpenTelemetry metrics in the Prometheus text
    format (``a2a.metrics_route``; needs the ``otel`` extra), behind the same credentials
    as the agent; off by default.
    ``console``: serve the web console at ``/console`` (``llamon_agent.a2a.console``):
    live tasks, failures over time, each task's page, read from this app's task and
    failure stores and ``console.events`` (else ``event_store``, else, with ``events``,
    what this process still holds). Its sign-in uses ``auth``'s credentials (operators
    only); without ``auth`` it answers on loopback only. ``ValueError`` when ``console.operators``
    names a caller ``auth`` does not know.
    ``allow_fault_injection`` (default off; for Quality Lab runs, never in production): a
    ``message/send`` or ``message/stream`` whose params metadata carries a fault plan
    (``core.faults.FAULTS_METADATA_KEY``) runs inside it -- its tools, model, MCP and
    agent calls and its task store saves fail as the plan says; a plan that does not parse
    is refused (-32602 ``invalid_fault_plan``). The card then declares the
    ``FAULTS_EXTENSION_URI`` extension, and a WARNING says so when the app starts. Off,
    the key is ignored.
    ``redis_url`` (needs the ``redis`` extra; ``ImportError`` naming it otherwise): every
    event of the tasks this app runs is also published to Redis Streams in the background
    (``llamon_agent.a2a.relay``; Redis down: one WARNING, the tasks go on), and a
    ``tasks/resubscribe`` of a task another replica runs on the same task store streams
    its events from there instead of answering task-not-found; Redis down then ends that
    stream with ``UPSTREAM_UNAVAILABLE`` / ``event_relay_unavailable`` (retriable).
    A ``tasks/cancel`` of a task another replica runs asks that replica, through Redis,
    to cancel it, and answers the run's real end: ``canceled``, -32002 if it ended first,
    ``UPSTREAM_TIMEOUT`` / ``cancel_unconfirmed`` (retriable) if its end does not arrive
    within 10 s; every replica cancels the runs it holds that way.
    ``app.state.llamon_event_relay`` holds the relay (``None`` without ``redis_url``).
    With ``redis_url``, liveness is on as well (``llamon_agent.a2a.liveness``,
    ``app.state.llamon_liveness``): while serving, this worker beats in Redis every
    ``heartbeat`` seconds (``None``: ``LLAMON_HEARTBEAT_SECONDS``, else 5) with a lease of
    ``worker_lease`` seconds (``None``: ``LLAMON_WORKER_LEASE_SECONDS``, else 15; longer
    than the beat, or ``ValueError``), and the unfinished tasks of a replica that stopped
    beating are ended ``failed`` / ``worker_lost`` (retriable) within lease + one beat.
    """
    install_log_scrubbing()
    _quiet_client_mistakes()
    if event_store is not None and events is None:
        events = EventBus()  # the store is its subscriber
    defaults = memory_stores()  # used for whichever store is not given
    tasks = defaults.task_store if task_store is None else task_store
    limits = limits or RequestLimits(input_modes=tuple(card.default_input_modes) or None)
    executor = executor or CustomAgentExecutor(
        agent, limits=limits, task_store=tasks, events=events
    )
    if allow_fault_injection:
        executor.allow_fault_injection = True
        card = _declaring_fault_injection(card)
    if events is not None and executor.events is None:
        executor.events = events
    if executor.failure_store is None:
        executor.failure_store = failure_store or defaults.failures
    executor.agent_name = executor.agent_name or card.name
    push_enabled = bool(card.capabilities and card.capabilities.push_notifications)
    push_store: PushNotificationConfigStore | None = None
    if push_enabled:
        push_store = defaults.push_config_store if push_config_store is None else push_config_store
    _check_auth_matches_card(card, auth)
    _check_card_is_servable(card, auth, extended_card)
    push_sender: BackgroundPushSender | None = None
    if push_store is not None:
        policy = push_policy or PushPolicy(allow=push_allow_setting())
        push_store = PolicyCheckedConfigStore(push_store, policy)
        push_sender = BackgroundPushSender(push_store, policy)
    if idempotency_window is None:
        idempotency_window = idempotency_window_setting()
    window = DEFAULT_WINDOW if idempotency_window is None else idempotency_window
    card = _declaring_idempotent_sends(card, window)
    relay: EventRelay | None = None
    liveness: Liveness | None = None
    if redis_url is not None:
        from llamon_agent.a2a import relay as relay_module  # the redis extra's

        relay = relay_module.EventRelay(redis_url)
        from llamon_agent.a2a import liveness as liveness_module  # the redis extra's

        liveness = liveness_module.Liveness(
            redis_url,
            worker=executor.worker_id,
            end_tasks=liveness_module.ending_tasks_of(tasks, executor.failure_store),
            beat=heartbeat,
            lease=worker_lease,
        )
    handler = LlamonRequestHandler(
        executor,
        task_store=tasks,
        push_config_store=push_store,
        push_sender=push_sender,
        idempotency_window=window,
        relay=relay,
    )

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if gc_freeze:
            freeze_startup_heap()
        if allow_fault_injection:
            logger.warning(
                "fault injection is allowed: requests may carry a fault plan (metadata %s); "
                "never run this in production",
                FAULTS_METADATA_KEY,
            )
        handler.start_listening()  # with redis_url: cancels other replicas were sent
        if liveness is not None:
            await liveness.start()  # beats; ends the tasks of replicas that stopped beating
        try:
            yield
        finally:
            ended = await executor.shutdown()
            if ended:
                logger.warning("server stopping: ended %d running task(s) failed", len(ended))
            await handler.aclose()
            if liveness is not None:
                await liveness.aclose()  # its tasks were ended above: nobody sweeps it
            if relay is not None:
                await relay.aclose()  # what the runs posted last reaches Redis
            if push_sender is not None:
                await push_sender.aclose()
            if events is not None:
                await events.flush(within=1.0)  # the last events reach their files
            if kept_events is not None:
                await kept_events.flush()  # ... and the task event store
            if on_shutdown is not None:
                result = on_shutdown()
                if hasattr(result, "__await__"):
                    await result

    app = LlamonA2AApplication(
        agent_card=card, http_handler=handler, extended_agent_card=extended_card, limits=limits
    ).build(lifespan=lifespan)
    app.router.routes.extend(health_routes(tasks))  # /healthz, /readyz: open, like the card
    task_events: TaskEventLog | None = None
    if events is not None:
        task_events = TaskEventLog()
        events.subscribe_inline(task_events, name="task-events")  # O(1), never blocks
        app.router.routes.append(task_events_route(task_events, handler.task_store))
    if events is not None and span_events:
        span_event_subscriber(events)  # inline: it needs the emitter's current span
    kept_events = event_store
    if kept_events is not None and events is not None:
        kept_events.subscribe(events)
    if metrics:
        from llamon_agent.a2a.metrics_route import metrics_routes  # the otel extra's

        app.router.routes.extend(metrics_routes())
    if console is not None:
        reader = served_event_reader(console.events or kept_events, events, task_events)
        failures = executor.failure_store
        assert failures is not None  # noqa: S101 - set above
        sources = ConsoleSources(tasks, failures, reader)
        app.router.routes.extend(console_routes_for(sources, auth, console))
    if auth is not None:
        own = (CONSOLE_PATH,) if console is not None else ()
        app.add_middleware(AuthMiddleware, config=auth, own_auth_prefixes=own)
    app.state.llamon_executor = executor
    app.state.llamon_task_store = tasks
    app.state.llamon_failure_store = executor.failure_store
    app.state.llamon_push_sender = push_sender
    app.state.llamon_sent_messages = handler.sent
    app.state.llamon_request_handler = handler
    app.state.llamon_task_events = task_events
    app.state.llamon_event_store = kept_events
    app.state.llamon_event_relay = relay
    app.state.llamon_liveness = liveness
    return app
