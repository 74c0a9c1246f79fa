"""``run_loop``: the native tool-calling loop, where every failure has a name and a place.

Each round calls the model once, then dispatches its tool calls in order. Seven named
failures, on two axes -- where they happen, and whether the loop goes on:

=========================  ==========  ============  =======================================
reason                     stage       kind          the model sees / the caller gets
=========================  ==========  ============  =======================================
``unknown_tool``           tool_loop   observation   ``unknown_tool: No tool named ...``
``malformed_arguments``    tool_loop   observation   ``malformed_arguments: ... not valid JSON``
``invalid_arguments``      tool_loop   observation   ``invalid_arguments: field 'a': ...``
``repeated_tool_call``     tool_loop   observation   ``repeated_tool_call: ... not run again``
``tool_error``             tool_loop   observation   ``tool_error: Tool 'x' failed ...``
``invalid_model_response`` model_call  terminal      status ``invalid_model_response``
``max_rounds_exceeded``    tool_loop   terminal      status ``max_rounds_exceeded``
=========================  ==========  ============  =======================================

An observation goes back to the model as ``ToolMessage(tool_call_id=<the call's id>,
is_error=True)`` and the loop continues; a terminal failure ends the run with a typed
status. A model call that raises ends the run too, as status ``model_error`` carrying the
exception's classification. A tool's own ``ToolResult.failure`` is passed back to the
model like any observation. A ``ToolLike`` whose ``call`` raises (an MCP tool's third
transport failure in one request) escalates: status ``tool_escalated``, with the
exception's classification; the other calls of that round do not run. (A ``Tool``'s
handler that raises is a ``tool_error`` observation: ``Tool.call`` never raises.) None of
these raise out of ``run_loop``; only cancellation and ``BaseException``\\s that are not
``Exception`` do.

Each round calls the model once; a ``ToolDispatcher`` (``loop/dispatch.py``) runs the
calls it wrote, in order: look the name up in the view, parse ``arguments_json``,
validate, block a repeat, run. A call is a repeat when its name and raw argument string
equal those of the call just before it (in this run, across rounds); its handler is not
run again.

Each model call goes through ``complete_model`` (``loop/model_call.py``), where a Quality
Lab fault plan's model faults take effect.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Final

from opentelemetry.trace import Span

from llamon_agent.core.classify import Classification, classify_exception
from llamon_agent.core.codes import Stage
from llamon_agent.core.events import EventBus
from llamon_agent.core.failures import FailureRecord
from llamon_agent.core.telemetry import (
    MODEL_RETRIES,
    USAGE_INPUT_TOKENS,
    USAGE_OUTPUT_TOKENS,
    chat_span,
    mark_failed,
    record_model_retries,
)
from llamon_agent.loop._spans import idle_span
from llamon_agent.loop.dispatch import ToolDispatcher, ToolEscalation
from llamon_agent.loop.events import EventHandler, EventSink, failure_metadata
from llamon_agent.loop.model import (
    AssistantMessage,
    ChatMessage,
    Model,
    ModelResponse,
    ToolSpec,
    UserMessage,
)
from llamon_agent.loop.model_call import complete_model
from llamon_agent.loop.outcome import LoopOutcome, LoopStatus
from llamon_agent.loop.tools import ToolRegistry, ToolView

__all__ = ["DEFAULT_MAX_ROUNDS", "run_loop"]

DEFAULT_MAX_ROUNDS: Final = 8


class _Run:
    """The state of one ``run_loop`` call: the transcript, the model's counts, the rounds."""

    __slots__ = (
        "dispatcher",
        "events",
        "max_rounds",
        "model",
        "model_retries",
        "rounds",
        "specs",
        "transcript",
        "usage",
    )

    def __init__(
        self,
        model: Model,
        tools: ToolView,
        transcript: list[ChatMessage],
        max_rounds: int,
        on_event: EventHandler | None,
        bus: EventBus | None = None,
    ) -> None:
        self.model = model
        self.specs: tuple[ToolSpec, ...] = tools.specs()
        self.transcript = transcript
        self.max_rounds = max_rounds
        self.events = EventSink(on_event, run_id=_new_run_id(), bus=bus)
        self.dispatcher = ToolDispatcher(tools, events=self.events)
        self.usage: dict[str, int] = {}
        self.rounds = 0
        self.model_retries = 0

    async def run(self) -> LoopOutcome:
        """Rounds until the model answers, a failure ends the run, or the rounds run out."""
        if self.events.observed:
            await self._emit(
                "run.started",
                Stage.TOOL_LOOP,
                {"max_rounds": self.max_rounds, "tool_names": list(self.dispatcher.tools.names)},
            )
        while self.rounds < self.max_rounds:
            self.rounds += 1
            ended = await self._round()
            if ended is not None:
                return ended
        return await self._out_of_rounds()

    async def _out_of_rounds(self) -> LoopOutcome:
        results, failures = self.dispatcher.results, self.dispatcher.failures
        record = FailureRecord.of(
            "max_rounds_exceeded",
            f"No final answer after {self.max_rounds} rounds "
            f"({len(results)} tool calls, {len(failures)} failed).",
            evidence={
                "max_rounds": self.max_rounds,
                "rounds": self.rounds,
                "tool_call_count": len(results),
                "failed_call_count": len(failures),
            },
        )
        return await self._end("max_rounds_exceeded", record=record)

    async def _round(self) -> LoopOutcome | None:
        """One model call and the tool calls it wrote; the outcome when the run ends here."""
        try:
            idle = idle_span()  # (a span started now would change nothing: not started)
            response = await (self._complete() if idle is None else self._complete_in(idle))
        except Exception as exc:
            found = classify_exception(exc)
            self.model_retries += found.retried  # the retries of the call that failed
            record = FailureRecord.from_exception(
                exc, stage=Stage.MODEL_CALL, evidence={"round": self.rounds}
            )
            return await self._end("model_error", record=record, classification=found)
        if not isinstance(response, ModelResponse):
            return await self._invalid_response(
                "The model adapter returned something other than a ModelResponse.",
                {"error_type": type(response).__name__},
            )
        self._count(response)
        calls = tuple(response.tool_calls or ())
        if self.events.observed:  # each round: post, no coroutine without a handler
            pending = self.events.post(
                "model.completed",
                Stage.MODEL_CALL,
                round_number=self.rounds,
                metadata={"tool_call_count": len(calls), "retries_count": response.retries},
            )
            if pending is not None:
                await pending
        self.transcript.append(AssistantMessage(content=response.content, tool_calls=calls))
        if not calls:
            text = response.content if isinstance(response.content, str) else ""
            if text.strip():
                return await self._end("completed", answer=text)
            return await self._invalid_response(
                "The model answered with neither a tool call nor any text.",
                {"content_present": response.content is not None},
            )
        for call in calls:
            done = await self.dispatcher.dispatch(call, round_number=self.rounds)
            if isinstance(done, ToolEscalation):
                return await self._end(
                    "tool_escalated", record=done.record, classification=done.classification
                )
            self.transcript.append(done)
        return None

    async def _complete(self) -> ModelResponse:
        """One model call under its ``chat {model}`` span (``core.telemetry``); ``_round``
        calls ``_complete_in`` directly when the span would change nothing
        (``loop._spans``)."""
        with chat_span(*_model_names(self.model)) as span:
            return await self._complete_in(span)

    async def _complete_in(self, span: Span) -> ModelResponse:
        """The model call of ``_complete``, its failure or usage marked on ``span``."""
        model = self.model
        try:
            response = await complete_model(model, tuple(self.transcript), self.specs)
        except Exception as exc:
            found = classify_exception(exc)
            mark_failed(
                span, reason=found.reason, error_code=found.code.value, stage=Stage.MODEL_CALL
            )
            record_model_retries(found.retried, _provider_name(model))
            raise
        if isinstance(response, ModelResponse):
            if response.retries != 0:  # (0 records nothing)
                record_model_retries(response.retries, _provider_name(model))
            if span.is_recording():
                span.set_attributes(_usage_attributes(response))
        return response

    def _count(self, response: ModelResponse) -> None:
        self.model_retries += max(0, int(response.retries or 0))
        usage = response.usage
        for key, amount in dict(usage).items() if usage else ():
            if isinstance(amount, int):
                self.usage[key] = self.usage.get(key, 0) + amount

    async def _emit(self, type_: str, stage: str, metadata: dict[str, object]) -> None:
        """A run-level event of the current round (``EventSink.post``)."""
        pending = self.events.post(type_, stage, round_number=self.rounds, metadata=metadata)
        if pending is not None:
            await pending

    async def _invalid_response(self, message: str, evidence: dict[str, object]) -> LoopOutcome:
        record = FailureRecord.of(
            "invalid_model_response", message, evidence={"round": self.rounds, **evidence}
        )
        return await self._end("invalid_model_response", record=record)

    async def _end(
        self,
        status: LoopStatus,
        *,
        answer: str | None = None,
        record: FailureRecord | None = None,
        classification: Classification | None = None,
    ) -> LoopOutcome:
        failures = self.dispatcher.failures
        if record is not None:
            failures += (record,)
        if self.events.observed:
            if record is None:
                await self._emit("run.completed", Stage.TOOL_LOOP, {"rounds": self.rounds})
            else:
                await self._emit("run.failed", record.stage, failure_metadata(record))
        return LoopOutcome(
            status=status,
            answer=answer,
            transcript=tuple(self.transcript),
            tool_results=self.dispatcher.results,
            failures=failures,
            rounds=self.rounds,
            model_retries=self.model_retries,
            run_id=self.events.run_id,
            usage=dict(self.usage),
            classification=classification,
        )


def _new_run_id() -> str:
    """Twelve hex digits naming one run in its events and outcome (a correlation id, not
    a secret: drawn from ``random``, which is reseeded in a forked child)."""
    return f"{random.getrandbits(48):012x}"


def _model_names(model: Model) -> tuple[str, str | None]:
    """``(gen_ai.request.model, gen_ai.provider.name)`` of ``model``: its ``model`` (a
    provider adapter) or ``name`` (``ScriptedModel``), else its class; its provider."""
    names = (getattr(model, "model", None), getattr(model, "name", None))
    name = next((n for n in names if isinstance(n, str) and n), type(model).__name__)
    return name, _provider_name(model)


def _provider_name(model: Model) -> str | None:
    """``gen_ai.provider.name`` of ``model``: its ``provider``, lower case, if a string."""
    provider = getattr(model, "provider", None)
    return provider.lower() if isinstance(provider, str) else None


def _usage_attributes(response: ModelResponse) -> dict[str, int]:
    usage = response.usage or {}
    attributes = {MODEL_RETRIES: max(0, int(response.retries or 0))}
    for key, attribute in (
        ("input_tokens", USAGE_INPUT_TOKENS),
        ("output_tokens", USAGE_OUTPUT_TOKENS),
    ):
        amount = usage.get(key)
        if isinstance(amount, int):
            attributes[attribute] = amount
    return attributes


async def run_loop(
    model: Model,
    tools: ToolView | ToolRegistry,
    messages: str | Sequence[ChatMessage],
    *,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    on_event: EventHandler | None = None,
    events: EventBus | None = None,
) -> LoopOutcome:
    """Run the tool loop until the model answers, fails, or ``max_rounds`` model calls pass.

    ``tools`` is the view of tools this run may use (a registry means all of its tools
    as they are now). ``messages`` is the transcript so far, or a prompt string (one user
    message). A round is one model call plus the tool calls it asked for, run in order;
    the tool calls of the last round run too (their results are in ``tool_results``)
    before the run ends ``max_rounds_exceeded``. Returns a ``LoopOutcome``; see the module
    docstring for what can end a run. ``max_rounds`` below 1 raises ``ValueError``.
    ``on_event`` is called in line with each ``LoopEvent``; ``events`` (default: the bus
    of the surrounding ``event_scope``, e.g. the A2A server's) gets them queued.
    """
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise ValueError(f"max_rounds must be a positive integer, got {max_rounds!r}")
    view = tools.view() if isinstance(tools, ToolRegistry) else tools
    transcript: list[ChatMessage] = (
        [UserMessage(messages)] if isinstance(messages, str) else list(messages)
    )
    return await _Run(model, view, transcript, max_rounds, on_event, events).run()
