"""OpenTelemetry spans and metrics: their names, their attributes and the failure rule.

llamon-agent depends on ``opentelemetry-api`` only. Without an OpenTelemetry SDK
configured every call here is the API's no-op (a non-recording span, instruments that
record nothing); configure a ``TracerProvider`` / ``MeterProvider`` (``pip install
'llamon-agent[otel]'``) and the same calls export. Spans follow the OpenTelemetry GenAI
semantic conventions::

    span                   where                       attributes
    invoke_agent {agent}   one A2A task run             gen_ai.operation.name=invoke_agent,
                           (a2a/executor.py)            gen_ai.agent.name, gen_ai.conversation.id
                                                        (the context id), llamon.task.id,
                                                        llamon.task.state
    chat {model}           one model call              gen_ai.operation.name=chat,
                           (loop/runner.py)             gen_ai.request.model, gen_ai.provider.name,
                                                        gen_ai.usage.input_tokens / output_tokens,
                                                        llamon.model.retries
    execute_tool {tool}    one tool call               gen_ai.operation.name=execute_tool,
                           (loop/dispatch.py)           gen_ai.tool.name, gen_ai.tool.call.id
    flow_node {node}       one flow node run           llamon.flow.name, llamon.flow.node,
                           (flow/builder.py)            llamon.flow.node_kind

The failure rule (``mark_failed``), the same on every span: status ``ERROR`` with the
reason as its description, ``error.type`` = the reason (``tool_error``,
``rate_limited`` ...), ``llamon.error_code`` = the errorCode, ``llamon.stage`` = the
stage. Exceptions are never recorded on a span (no ``exception`` event): their text may
hold what must not leave the process. No attribute holds a secret, an argument value,
message text or a URL -- only names, ids, codes, counts.

Trace context crosses agent hops as W3C ``traceparent`` / ``tracestate`` HTTP headers
(``inject_trace_headers`` on the caller, ``context_from_headers`` on the server), so A ->
B -> C through ``AgentClient`` is one trace. A caller that cannot set headers may put
``traceparent`` (and ``tracestate``) in the A2A message's ``metadata`` instead; the server
reads it there when the request has no ``traceparent`` header (``trace_carrier``).

The task's runner events carry the trace: ``trace_id_of(span)`` is the 32-hex trace id
the executor puts on ``task.working`` (``trace_metadata["trace_id"]``), and
``span_event_subscriber`` (``EventBus.subscribe_inline``) adds each runner event as a span
event on the span current where it was emitted: name = the event's type, attributes =
``llamon.stage``, ``llamon.flow.node``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``error.type`` (the failure reason), ``llamon.error_code``, ``llamon.retryable`` -- ids and
codes only, never message text or evidence values. Without an SDK it returns at once
(the span is not recording).

Metrics (instruments of the meter ``llamon_agent``; label values are bounded: states,
codes, reasons, names -- never ids)::

    llamon.tasks            counter     gen_ai.agent.name, llamon.task.state, llamon.error_code
    llamon.tool.calls       counter     gen_ai.tool.name, llamon.outcome, error.type
    llamon.model.retries    counter     gen_ai.provider.name
    llamon.stream.duration  histogram   gen_ai.agent.name, llamon.task.state (seconds)
    llamon.failure.latency  histogram   gen_ai.agent.name, llamon.error_code (seconds from the
                                        task's start to its failed answer)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Final

from opentelemetry import metrics, propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from llamon_agent.core.catalog import reason_spec
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import Stage
from llamon_agent.core.events import EventBus, RunnerEvent

__all__ = [
    "AGENT_NAME",
    "CONVERSATION_ID",
    "ERROR_CODE",
    "ERROR_TYPE",
    "FLOW_NAME",
    "FLOW_NODE",
    "FLOW_NODE_KIND",
    "INSTRUMENTATION_NAME",
    "MODEL_RETRIES",
    "OPERATION_NAME",
    "OUTCOME",
    "PROVIDER_NAME",
    "REQUEST_MODEL",
    "RETRYABLE",
    "STAGE",
    "TASK_ID",
    "TASK_STATE",
    "TOOL_CALL_ID",
    "TOOL_NAME",
    "USAGE_INPUT_TOKENS",
    "USAGE_OUTPUT_TOKENS",
    "SpanEventSubscriber",
    "chat_span",
    "context_from_headers",
    "flow_node_span",
    "inject_trace_headers",
    "invoke_agent_span",
    "mark_exception",
    "mark_failed",
    "reason_stage",
    "record_failure_latency",
    "record_model_retries",
    "record_stream_duration",
    "record_task_end",
    "record_tool_call",
    "span_event_subscriber",
    "tool_span",
    "trace_carrier",
    "trace_id_of",
    "tracer_provider_set",
]

INSTRUMENTATION_NAME: Final = "llamon_agent"
"""The tracer's and the meter's name."""

_UNREADABLE: Final = object()


def tracer_provider_set() -> bool:
    """Whether an OpenTelemetry tracer provider is installed for the process.

    Without one, every span started anywhere (llamon's, a2a-sdk's) records nothing, so
    hot paths may skip starting spans that would change nothing. Reads the API's own
    global, as its proxy tracer does (no environment lookup per call); a provider named by
    ``OTEL_PYTHON_TRACER_PROVIDER`` is installed when this module gets its tracer. When
    that global is not there, ``get_tracer_provider`` answers.
    """
    installed = getattr(trace, "_TRACER_PROVIDER", _UNREADABLE)
    if installed is _UNREADABLE:
        return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return installed is not None


# -- attribute names (GenAI semantic conventions, then llamon's own) ------------------------
OPERATION_NAME: Final = "gen_ai.operation.name"
AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
REQUEST_MODEL: Final = "gen_ai.request.model"
PROVIDER_NAME: Final = "gen_ai.provider.name"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
ERROR_TYPE: Final = "error.type"
ERROR_CODE: Final = "llamon.error_code"
STAGE: Final = "llamon.stage"
TASK_ID: Final = "llamon.task.id"
TASK_STATE: Final = "llamon.task.state"
MODEL_RETRIES: Final = "llamon.model.retries"
OUTCOME: Final = "llamon.outcome"
FLOW_NAME: Final = "llamon.flow.name"
FLOW_NODE: Final = "llamon.flow.node"
FLOW_NODE_KIND: Final = "llamon.flow.node_kind"

_tracer = trace.get_tracer(INSTRUMENTATION_NAME)
"""A proxy until an SDK's provider is set; then every span goes to that provider."""
_meter = metrics.get_meter(INSTRUMENTATION_NAME)

_tasks = _meter.create_counter(
    "llamon.tasks", unit="{task}", description="Tasks ended, by final state and errorCode."
)
_tool_calls = _meter.create_counter(
    "llamon.tool.calls", unit="{call}", description="Tool calls, by outcome and reason."
)
_model_retries = _meter.create_counter(
    "llamon.model.retries", unit="{retry}", description="Model call retries made by adapters."
)
_stream_duration = _meter.create_histogram(
    "llamon.stream.duration", unit="s", description="Duration of streamed tasks (message/stream)."
)
_failure_latency = _meter.create_histogram(
    "llamon.failure.latency",
    unit="s",
    description="Time from a task's start to its failed answer.",
)


# -- spans ---------------------------------------------------------------------------------


@contextmanager
def _span(
    name: str,
    attributes: Mapping[str, str | int],
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    context: Context | None = None,
) -> Iterator[Span]:
    """A current span that never records an exception's text or sets status by itself."""
    with _tracer.start_as_current_span(
        name,
        context=context,
        kind=kind,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        if span.is_recording():
            span.set_attributes(dict(attributes))
        yield span


def invoke_agent_span(
    agent: str,
    *,
    task_id: str,
    context_id: str,
    headers: Mapping[str, str] | None = None,
    metadata: Mapping[str, object] | None = None,
) -> AbstractContextManager[Span]:
    """The ``invoke_agent {agent}`` span of one task run, a child of the caller's span
    when ``headers`` (the request's HTTP headers) carry a W3C ``traceparent``, else when
    the message's ``metadata`` does (``trace_carrier``)."""
    carrier = trace_carrier(headers, metadata)
    parent = context_from_headers(carrier) if carrier else None
    return _span(
        f"invoke_agent {agent}",
        {
            OPERATION_NAME: "invoke_agent",
            AGENT_NAME: agent,
            CONVERSATION_ID: context_id,
            TASK_ID: task_id,
        },
        kind=SpanKind.SERVER,
        context=parent,
    )


def chat_span(model: str, provider: str | None = None) -> AbstractContextManager[Span]:
    """The ``chat {model}`` span of one model call (the adapter's retries inside it)."""
    attributes: dict[str, str | int] = {OPERATION_NAME: "chat", REQUEST_MODEL: model}
    if provider:
        attributes[PROVIDER_NAME] = provider
    return _span(f"chat {model}", attributes, kind=SpanKind.CLIENT)


def tool_span(tool: str, call_id: str) -> AbstractContextManager[Span]:
    """The ``execute_tool {tool}`` span of one tool call."""
    return _span(
        f"execute_tool {tool}",
        {OPERATION_NAME: "execute_tool", TOOL_NAME: tool, TOOL_CALL_ID: call_id},
    )


def flow_node_span(flow: str, node: str, node_kind: str) -> AbstractContextManager[Span]:
    """The ``flow_node {node}`` span of one run of a flow node."""
    return _span(
        f"flow_node {node}",
        {FLOW_NAME: flow, FLOW_NODE: node, FLOW_NODE_KIND: node_kind},
    )


def mark_failed(span: Span, *, reason: str, error_code: str, stage: str) -> None:
    """The failure rule: status ERROR (described by ``reason``), ``error.type`` = reason,
    ``llamon.error_code``, ``llamon.stage``. Nothing else of the failure is recorded."""
    if not span.is_recording():
        return
    span.set_attributes({ERROR_TYPE: str(reason), ERROR_CODE: str(error_code), STAGE: str(stage)})
    span.set_status(Status(StatusCode.ERROR, reason))


def mark_exception(span: Span, exc: BaseException, *, stage: str | None = None) -> None:
    """``mark_failed`` with what ``core.classify`` makes of ``exc`` (never its text);
    ``stage`` defaults to the reason's catalog stage (``service`` for an unknown one)."""
    if not span.is_recording():
        return
    found = classify_exception(exc)
    where = stage or reason_stage(found.reason)
    mark_failed(span, reason=found.reason, error_code=found.code.value, stage=where)


def reason_stage(reason: str) -> str:
    """The stage the reason catalog gives ``reason`` (``service`` for an unknown one)."""
    spec = reason_spec(reason)
    return str(spec.stage) if spec is not None else Stage.SERVICE.value


# -- trace context across hops -------------------------------------------------------------


def inject_trace_headers(headers: dict[str, str]) -> None:
    """Add the current span's ``traceparent`` / ``tracestate`` (the configured
    propagators) to ``headers``; nothing when no span is recording."""
    propagate.inject(headers)


def context_from_headers(headers: Mapping[str, str]) -> Context:
    """The caller's trace context read from request ``headers`` (W3C ``traceparent``)."""
    return propagate.extract(headers)


_TRACE_KEYS: Final = ("traceparent", "tracestate")


def trace_carrier(
    headers: Mapping[str, str] | None, metadata: Mapping[str, object] | None
) -> Mapping[str, str] | None:
    """Where the caller's trace context is: ``headers`` when they carry a ``traceparent``,
    else the message ``metadata``'s ``traceparent`` / ``tracestate`` (strings only), else
    ``headers``. A malformed ``traceparent`` is ignored by the propagator (a new trace)."""
    if headers and any(key.lower() == "traceparent" for key in headers):
        return headers
    if metadata:
        carried = {key: value for key in _TRACE_KEYS if isinstance(value := metadata.get(key), str)}
        if "traceparent" in carried:
            return carried
    return headers


def trace_id_of(span: Span) -> str | None:
    """The 32-hex trace id of ``span`` while it records (an SDK is configured), else None."""
    if not span.is_recording():
        return None
    return format(span.get_span_context().trace_id, "032x")


# -- metrics -------------------------------------------------------------------------------


def record_task_end(agent: str, state: str, error_code: str | None = None) -> None:
    """Count one task that ended ``state`` (``error_code`` for a failed one)."""
    attributes = {AGENT_NAME: agent, TASK_STATE: state}
    if error_code:
        attributes[ERROR_CODE] = error_code
    _tasks.add(1, attributes)


def record_tool_call(tool: str, outcome: str, reason: str | None = None) -> None:
    """Count one tool call: ``outcome`` ``ok`` / ``error`` / ``escalated``, its reason."""
    attributes = {TOOL_NAME: tool, OUTCOME: outcome}
    if reason:
        attributes[ERROR_TYPE] = reason
    _tool_calls.add(1, attributes)


def record_model_retries(count: int, provider: str | None = None) -> None:
    """Count ``count`` retries a model adapter made (nothing for 0)."""
    if count > 0:
        _model_retries.add(count, {PROVIDER_NAME: provider} if provider else {})


def record_stream_duration(agent: str, state: str, seconds: float) -> None:
    """One streamed task's duration, by its final state."""
    _stream_duration.record(seconds, {AGENT_NAME: agent, TASK_STATE: state})


def record_failure_latency(agent: str, error_code: str, seconds: float) -> None:
    """How long a failed task took to answer, by errorCode."""
    _failure_latency.record(seconds, {AGENT_NAME: agent, ERROR_CODE: error_code})


# -- runner events as span events ----------------------------------------------------------

RETRYABLE: Final = "llamon.retryable"

_EVENT_FIELDS: Final = (
    ("stage", STAGE),
    ("node", FLOW_NODE),
    ("tool", TOOL_NAME),
    ("step_id", TOOL_CALL_ID),
)


class SpanEventSubscriber:
    """An inline ``EventBus`` subscriber: each ``RunnerEvent`` becomes a span event on the
    span current where it was emitted (see the module docstring for what it carries).
    ``added`` counts the span events added."""

    __slots__ = ("added",)

    def __init__(self) -> None:
        self.added = 0

    def __call__(self, event: RunnerEvent) -> None:
        span = trace.get_current_span()
        if not span.is_recording():
            return
        attributes: dict[str, str | bool] = {}
        for name, key in _EVENT_FIELDS:
            value = getattr(event, name)
            if value:
                attributes[key] = str(value)
        meta = event.trace_metadata
        reason, code, retryable = (
            meta.get("failure_reason"),
            meta.get("error_code"),
            meta.get("retryable"),
        )
        if isinstance(reason, str):
            attributes[ERROR_TYPE] = reason
        if isinstance(code, str):
            attributes[ERROR_CODE] = code
        if isinstance(retryable, bool):
            attributes[RETRYABLE] = retryable
        span.add_event(event.type, attributes)
        self.added += 1


def span_event_subscriber(bus: EventBus) -> SpanEventSubscriber:
    """Add every event of ``bus`` as a span event from now on (an inline subscriber: it
    runs in the emitter's context, so the current span is the task's, node's or tool's);
    returns the subscriber. A bus has at most one: a second call returns the first."""
    for sub in bus.subscriptions:
        if isinstance(sub.callback, SpanEventSubscriber) and not sub.closed:
            return sub.callback
    subscriber = SpanEventSubscriber()
    bus.subscribe_inline(subscriber, name="otel-span-events")
    return subscriber
