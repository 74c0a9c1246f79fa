"""What llamon relies on inside a2a-sdk still exists, with the signature llamon expects.

llamon subclasses a2a-sdk's request handler, result aggregator, task manager, event queue,
queue manager, JSON-RPC handler and JSON-RPC app, overrides some of their private
methods, and reads private attributes a2a-sdk sets in its constructors. None of that is
a2a-sdk's public API: an upgrade may rename, drop or re-sign any of it without notice.
These tests fail on such an upgrade and name what changed (an end-to-end test would fail
somewhere else, or a hook would silently stop being called).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, Literal

import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext, RequestContextBuilder
from a2a.server.apps import A2AStarletteApplication
from a2a.server.apps.jsonrpc import jsonrpc_app
from a2a.server.apps.jsonrpc.jsonrpc_app import JSONRPCApplication
from a2a.server.events import EventConsumer, EventQueue, InMemoryQueueManager
from a2a.server.request_handlers import DefaultRequestHandler, JSONRPCHandler
from a2a.server.tasks import (
    DatabaseTaskStore,
    InMemoryTaskStore,
    PushNotificationConfigStore,
    ResultAggregator,
    TaskManager,
)
from a2a.types import AgentCapabilities, AgentCard

from llamon_agent.a2a import handler as llamon_handler
from llamon_agent.a2a import queues as llamon_queues
from llamon_agent.a2a import server as llamon_server

SDK = f"a2a-sdk {version('a2a-sdk')}"

Kind = Literal["async", "sync", "asyncgen"]


@dataclass(frozen=True)
class Hook:
    """A method of an a2a-sdk class that llamon overrides or calls, as llamon expects it."""

    owner: type[Any]
    name: str
    parameters: tuple[str, ...]  # after ``self``
    kind: Kind
    used_by: str

    @property
    def id(self) -> str:
        return f"{self.owner.__name__}.{self.name}"


HOOKS = [
    # llamon_agent.a2a.handler.LlamonRequestHandler
    Hook(
        DefaultRequestHandler,
        "__init__",
        (
            "agent_executor",
            "task_store",
            "queue_manager",
            "push_config_store",
            "push_sender",
            "request_context_builder",
        ),
        "sync",
        "LlamonRequestHandler(agent_executor, task_store, **kwargs)",
    ),
    Hook(
        DefaultRequestHandler,
        "_setup_message_execution",
        ("params", "context"),
        "async",
        "LlamonRequestHandler overrides it (one run per task, its claim, its reader)",
    ),
    Hook(
        DefaultRequestHandler,
        "_run_event_stream",
        ("request", "queue"),
        "async",
        "LlamonRequestHandler overrides it (a raising executor ends the task at once)",
    ),
    Hook(
        DefaultRequestHandler,
        "_track_background_task",
        ("task",),
        "sync",
        "LlamonRequestHandler overrides it (a task started after the server stopped is cancelled)",
    ),
    Hook(
        DefaultRequestHandler,
        "_send_push_notification_if_needed",
        ("task_id", "result_aggregator"),
        "async",
        "LlamonRequestHandler overrides it (an event stored with a later one is not pushed)",
    ),
    Hook(
        DefaultRequestHandler,
        "_cleanup_producer",
        ("producer_task", "task_id"),
        "async",
        "LlamonRequestHandler overrides it (one run's queue released, its claim let go)",
    ),
    Hook(
        DefaultRequestHandler,
        "_register_producer",
        ("task_id", "producer_task"),
        "async",
        "LlamonRequestHandler._start_run calls it",
    ),
    Hook(
        RequestContextBuilder,
        "build",
        ("params", "task_id", "context_id", "task", "context"),
        "async",
        "LlamonRequestHandler._start_run calls _request_context_builder.build",
    ),
    Hook(
        PushNotificationConfigStore,
        "set_info",
        ("task_id", "notification_config"),
        "async",
        "LlamonRequestHandler._start_run calls _push_config_store.set_info",
    ),
    # llamon_agent.a2a.handler._RunManager
    Hook(
        TaskManager,
        "__init__",
        ("task_id", "context_id", "task_store", "initial_message", "context"),
        "sync",
        "_RunManager passes every argument by keyword",
    ),
    Hook(
        TaskManager,
        "save_task_event",
        ("event",),
        "async",
        "_RunManager overrides it (a run's claim is let go once its end is stored)",
    ),
    Hook(
        TaskManager,
        "_save_task",
        ("task",),
        "async",
        "_RunManager overrides it (a task a message starts is stamped llamon.sent)",
    ),
    Hook(
        TaskManager,
        "process",
        ("event",),
        "async",
        "_Reader.consume_and_emit calls it for each event it reads",
    ),
    Hook(
        TaskManager,
        "ensure_task",
        ("event",),
        "async",
        "_RunManager._save_artifact calls it (a2a-sdk's artifact branch of save_task_event)",
    ),
    # llamon_agent.a2a.run_events
    Hook(
        EventConsumer,
        "agent_task_callback",
        ("agent_task",),
        "sync",
        "run_events.watch_agent swaps it for the same callback without its span",
    ),
    # llamon_agent.a2a.handler._Reader
    Hook(ResultAggregator, "__init__", ("task_manager",), "sync", "_Reader(task_manager)"),
    Hook(
        ResultAggregator,
        "consume_and_break_on_interrupt",
        ("consumer", "blocking", "event_callback"),
        "async",
        "_Reader overrides it (a failed read ends the task alone)",
    ),
    Hook(
        ResultAggregator,
        "_continue_consuming",
        ("event_stream", "event_callback"),
        "async",
        "_Reader overrides it (a failed background read ends the task alone)",
    ),
    Hook(
        ResultAggregator,
        "consume_and_emit",
        ("consumer",),
        "asyncgen",
        "_Reader overrides it (a failed stream read ends the task alone)",
    ),
    Hook(
        ResultAggregator,
        "consume_all",
        ("consumer",),
        "async",
        "_Reader overrides it (a failed read ends the task alone)",
    ),
    # llamon_agent.a2a.queues
    Hook(EventQueue, "tap", (), "sync", "_TaskQueue overrides it (taps get copies)"),
    Hook(
        EventQueue,
        "clear_events",
        ("clear_child_queues",),
        "async",
        "_TaskQueue overrides it (a tap keeps its events)",
    ),
    Hook(EventQueue, "close", ("immediate",), "async", "_TappedQueue overrides it"),
    Hook(EventQueue, "enqueue_event", ("event",), "async", "_TappedQueue overrides it"),
    Hook(
        InMemoryQueueManager,
        "create_or_tap",
        ("task_id",),
        "async",
        "LlamonQueueManager overrides it",
    ),
    Hook(InMemoryQueueManager, "close", ("task_id",), "async", "LlamonQueueManager overrides it"),
    Hook(InMemoryQueueManager, "tap", ("task_id",), "async", "LlamonQueueManager calls it"),
    Hook(InMemoryQueueManager, "add", ("task_id", "queue"), "async", "LlamonQueueManager calls it"),
    # llamon_agent.a2a.server.LlamonA2AApplication
    Hook(
        JSONRPCApplication,
        "_handle_requests",
        ("request",),
        "async",
        "LlamonA2AApplication overrides it (the body read and parsed once, within limits)",
    ),
    Hook(
        JSONRPCApplication,
        "_process_non_streaming_request",
        ("request_id", "a2a_request", "context"),
        "async",
        "LlamonA2AApplication overrides it (params checked for every method)",
    ),
    Hook(
        JSONRPCApplication,
        "_process_streaming_request",
        ("request_id", "a2a_request", "context"),
        "async",
        "LlamonA2AApplication overrides it (a refusal is the stream's one error event)",
    ),
    Hook(
        JSONRPCApplication,
        "_create_response",
        ("context", "handler_result"),
        "sync",
        "LlamonA2AApplication overrides it (id always present, one of result/error)",
    ),
    Hook(
        JSONRPCApplication,
        "_generate_error_response",
        ("request_id", "error"),
        "sync",
        "LlamonA2AApplication overrides it (every error carries ProtocolErrorData)",
    ),
    # llamon_agent.a2a.server._LlamonJSONRPCHandler
    Hook(
        JSONRPCHandler,
        "__init__",
        (
            "agent_card",
            "request_handler",
            "extended_agent_card",
            "extended_card_modifier",
            "card_modifier",
        ),
        "sync",
        "LlamonA2AApplication builds _LlamonJSONRPCHandler by keyword",
    ),
    # llamon_agent.a2a.stores.context_lookup
    Hook(
        DatabaseTaskStore,
        "_from_orm",
        ("task_model",),
        "sync",
        "context_lookup reads a stored task of a context",
    ),
]


def _kind(function: Callable[..., Any]) -> Kind:
    if inspect.isasyncgenfunction(function):
        return "asyncgen"
    if inspect.iscoroutinefunction(function):
        return "async"
    return "sync"


@pytest.mark.parametrize("hook", HOOKS, ids=lambda hook: hook.id)
def test_a2a_sdk_method_llamon_relies_on_keeps_its_signature(hook: Hook) -> None:
    function = getattr(hook.owner, hook.name, None)
    assert function is not None, f"{SDK}: {hook.id} is gone; {hook.used_by}"
    found = tuple(inspect.signature(function).parameters)
    assert found == ("self", *hook.parameters), (
        f"{SDK}: {hook.id} now takes {found[1:]}, llamon expects {hook.parameters}; {hook.used_by}"
    )
    assert _kind(function) == hook.kind, (
        f"{SDK}: {hook.id} is now {_kind(function)}, llamon expects {hook.kind}; {hook.used_by}"
    )


@dataclass(frozen=True)
class Calls:
    """An a2a-sdk method whose body must still call a hook llamon overrides."""

    owner: type[Any]
    method: str
    hook: str

    @property
    def id(self) -> str:
        return f"{self.owner.__name__}.{self.method}->{self.hook}"


CALLS = [
    Calls(DefaultRequestHandler, "on_message_send", "_setup_message_execution"),
    Calls(DefaultRequestHandler, "on_message_send_stream", "_setup_message_execution"),
    Calls(DefaultRequestHandler, "on_message_send", "_cleanup_producer"),
    Calls(DefaultRequestHandler, "on_message_send_stream", "_cleanup_producer"),
    Calls(DefaultRequestHandler, "on_message_send", "consume_and_break_on_interrupt"),
    Calls(DefaultRequestHandler, "on_message_send_stream", "consume_and_emit"),
    Calls(DefaultRequestHandler, "on_message_send_stream", "_send_push_notification_if_needed"),
    Calls(TaskManager, "process", "save_task_event"),
    Calls(DefaultRequestHandler, "on_message_send", "agent_task_callback"),
    Calls(DefaultRequestHandler, "on_message_send_stream", "agent_task_callback"),
    Calls(DefaultRequestHandler, "on_resubscribe_to_task", "tap"),
    Calls(ResultAggregator, "consume_and_break_on_interrupt", "_continue_consuming"),
    Calls(JSONRPCApplication, "_handle_requests", "_process_streaming_request"),
    Calls(JSONRPCApplication, "_handle_requests", "_process_non_streaming_request"),
    Calls(JSONRPCApplication, "_handle_requests", "_generate_error_response"),
    Calls(JSONRPCApplication, "_process_non_streaming_request", "_create_response"),
    Calls(EventQueue, "enqueue_event", "_children"),
]


@pytest.mark.parametrize("calls", CALLS, ids=lambda calls: calls.id)
def test_a2a_sdk_still_calls_the_hooks_llamon_overrides(calls: Calls) -> None:
    source = inspect.getsource(getattr(calls.owner, calls.method))
    assert f".{calls.hook}" in source, (
        f"{SDK}: {calls.owner.__name__}.{calls.method} no longer uses {calls.hook}; "
        "llamon's override of it would never run"
    )


class _Idle(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def _card() -> AgentCard:
    return AgentCard(
        name="contract",
        description="contract",
        url="http://127.0.0.1/",
        version="1",
        capabilities=AgentCapabilities(),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[],
    )


_MISSING = object()


def _attributes() -> list[tuple[object, str, type[Any]]]:
    """(instance, attribute, the type llamon expects): a2a-sdk sets them in __init__."""
    handler = DefaultRequestHandler(_Idle(), InMemoryTaskStore())
    queue = EventQueue()
    consumer = EventConsumer(queue)
    manager_of_tasks = TaskManager(None, None, InMemoryTaskStore(), None)
    manager = InMemoryQueueManager()
    app = A2AStarletteApplication(_card(), handler)
    return [
        (handler, "_queue_manager", InMemoryQueueManager),
        (handler, "_push_config_store", type(None)),
        (handler, "_request_context_builder", RequestContextBuilder),
        (handler, "_running_agents", dict),
        (handler, "_running_agents_lock", asyncio.Lock),
        (queue, "_children", list),
        (queue, "_is_closed", bool),
        (queue, "_lock", asyncio.Lock),
        (queue, "queue", asyncio.Queue),
        (consumer, "queue", EventQueue),
        (consumer, "_exception", type(None)),
        (consumer, "_timeout", float),
        (ResultAggregator(manager_of_tasks), "_message", type(None)),
        (manager, "_task_queue", dict),
        (manager, "_lock", asyncio.Lock),
        (app, "handler", JSONRPCHandler),
        (app, "extended_agent_card", type(None)),
        (app, "extended_card_modifier", type(None)),
    ]


def test_a2a_sdk_attributes_llamon_reads_still_exist() -> None:
    problems = [
        f"{type(obj).__name__}.{attr} is "
        f"{'missing' if not hasattr(obj, attr) else type(getattr(obj, attr)).__name__}"
        f" (llamon expects {expected.__name__})"
        for obj, attr, expected in _attributes()
        if not isinstance(getattr(obj, attr, _MISSING), expected)
    ]
    assert not problems, f"{SDK}: " + "; ".join(problems)


def test_a2a_sdk_log_line_llamon_filters_still_exists() -> None:
    """``server._ClientMistakeFilter`` drops a2a-sdk's traceback of a refused request by
    its logger and message (the traceback holds the request's values)."""
    assert llamon_server._A2A_APP_LOGGER.name == jsonrpc_app.logger.name
    assert "Failed to validate base JSON-RPC request" in inspect.getsource(jsonrpc_app), (
        f"{SDK}: the JSON-RPC app no longer logs 'Failed to validate base JSON-RPC request'; "
        "server._ClientMistakeFilter filters nothing any more"
    )


def test_every_override_llamon_makes_is_listed_here() -> None:
    """A new override of an a2a-sdk private method gets its row in HOOKS."""
    listed = {(hook.owner, hook.name) for hook in HOOKS}
    ours = [
        llamon_handler.LlamonRequestHandler,
        llamon_handler._Reader,
        llamon_handler._RunManager,
        llamon_queues._TaskQueue,
        llamon_queues._TappedQueue,
        llamon_queues.LlamonQueueManager,
        llamon_server.LlamonA2AApplication,
    ]
    missing = []
    for cls in ours:
        for name, value in vars(cls).items():
            if not (name.startswith("_") and not name.startswith("__") and callable(value)):
                continue
            owner = next((base for base in cls.__mro__[1:] if name in vars(base)), None)
            if owner is None or not owner.__module__.startswith("a2a."):
                continue  # llamon's own method, or one of llamon's classes
            if not any((base, name) in listed for base in cls.__mro__):
                missing.append(f"{cls.__name__}.{name} (a2a-sdk's {owner.__name__})")
    assert not missing, "add these overrides to HOOKS: " + ", ".join(missing)


def test_a2a_sdks_task_manager_appends_artifacts_with_the_traced_helper() -> None:
    """``_RunManager._save_artifact`` is a2a-sdk's artifact branch of ``save_task_event``
    with the helper's bare function (``__wrapped__``): both must still be there."""
    from a2a.server.tasks import task_manager
    from a2a.utils import helpers

    assert getattr(task_manager, "append_artifact_to_task") is helpers.append_artifact_to_task  # noqa: B009
    assert hasattr(helpers.append_artifact_to_task, "__wrapped__"), (
        f"{SDK}: append_artifact_to_task is no longer a wrapper; _RunManager._save_artifact"
    )
    source = inspect.getsource(TaskManager.save_task_event)
    for step in ("ensure_task(event)", "append_artifact_to_task(task, event)", "_save_task(task)"):
        assert step in source, f"{SDK}: TaskManager.save_task_event no longer calls {step}"
