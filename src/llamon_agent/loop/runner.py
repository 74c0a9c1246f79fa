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

Order of checks per call: look the name up in the view, parse ``arguments_json`` (here, at
the loop boundary -- never in a provider adapter), validate, block a repeat, run. A call is
a repeat when its name and raw argument string equal those of the call just before it (in
this run, across rounds); its handler is not run again.
"""

from __future__ import annotations

import inspect
import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from llamon_agent.core.catalog import reason_spec
from llamon_agent.core.classify import Classification, classify_exception
from llamon_agent.core.codes import Stage
from llamon_agent.core.failures import FailureRecord
from llamon_agent.loop.events import EventHandler, LoopEvent, failure_metadata
from llamon_agent.loop.model import (
    AssistantMessage,
    ChatMessage,
    Model,
    ModelResponse,
    RawToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from llamon_agent.loop.outcome import LoopOutcome, LoopStatus, ToolCallResult
from llamon_agent.loop.result import ToolResult
from llamon_agent.loop.tools import ToolLike, ToolRegistry, ToolView
from llamon_agent.loop.validation import check_arguments, format_problems, parse_arguments

__all__ = ["DEFAULT_MAX_ROUNDS", "run_loop"]

logger = logging.getLogger("llamon_agent.loop")

DEFAULT_MAX_ROUNDS: Final = 8
_NAME_SHOWN: Final = 64
_NAMES_LISTED: Final = 30

RETRY_INVITING_REASONS: Final = frozenset({"upstream_tool_unavailable"})
"""Failures whose text invites the model to retry the same call: not a repeated call."""


def _shown_name(name: object) -> str:
    """A model-written tool name, cut short for echoing back."""
    text = name if isinstance(name, str) else repr(name)
    return text if len(text) <= _NAME_SHOWN else text[:_NAME_SHOWN] + "…"


class _Escalation(Exception):
    """Carries what a ``ToolLike``'s ``call`` raised out of the step, to end the run."""

    def __init__(self, exc: Exception, record: FailureRecord, found: Classification) -> None:
        super().__init__(type(exc).__name__)
        self.exc = exc
        self.record = record
        self.classification = found


@dataclass
class _Run:
    """The state of one ``run_loop`` call."""

    model: Model
    tools: ToolView
    specs: tuple[ToolSpec, ...]
    max_rounds: int
    on_event: EventHandler | None
    run_id: str = field(default_factory=lambda: secrets.token_hex(6))
    transcript: list[ChatMessage] = field(default_factory=list)
    results: list[ToolCallResult] = field(default_factory=list)
    failures: list[FailureRecord] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    rounds: int = 0
    model_retries: int = 0
    previous: tuple[str, str] | None = None

    async def emit(
        self,
        type_: str,
        stage: str,
        *,
        tool: str | None = None,
        step_id: str | None = None,
        metadata: dict[str, object] | None = None,
    ) -> None:
        if self.on_event is None:
            return
        event = LoopEvent(type_, stage, self.run_id, self.rounds, tool, step_id, metadata or {})
        try:
            maybe = self.on_event(event)
            if inspect.isawaitable(maybe):
                await maybe
        except Exception as exc:
            logger.warning("on_event handler raised %s on %s; ignored", type(exc).__name__, type_)

    # ---------------------------------------------------------------- one tool call

    def _observation(
        self,
        reason: str,
        message: str,
        call: RawToolCall,
        evidence: dict[str, object] | None = None,
    ) -> ToolResult:
        record = FailureRecord.of(
            reason,
            message,
            tool=_shown_name(call.name),
            step_id=call.id,
            evidence={"tool_call_id": call.id, "round": self.rounds, **(evidence or {})},
        )
        return ToolResult.failure(reason, message, record=record)

    def _stamped(self, result: ToolResult, call: RawToolCall) -> ToolResult:
        """A failed result with a record that names this call (made when the tool gave none)."""
        where = {"tool_call_id": call.id, "round": self.rounds}
        reason = result.error_code or "tool_error"
        record = result.record
        if record is None:
            spec = reason_spec(reason)
            record = FailureRecord.of(
                reason,
                result.message,
                stage=spec.stage if spec else Stage.EXECUTE,
                tool=call.name,
                step_id=call.id,
                evidence=where,
            )
        else:
            # (re-scrubbing is idempotent except for the scrubber's own "dropped_keys")
            kept = {k: v for k, v in record.evidence.items() if k != "dropped_keys"}
            record = replace(
                record,
                tool=record.tool or call.name,
                step_id=record.step_id or call.id,
                evidence={**kept, **where},
            )
        return replace(result, record=record)

    @staticmethod
    async def _run_tool(tool: ToolLike, arguments: dict[str, Any]) -> Any:
        value: Any = tool.call(arguments)
        if inspect.isawaitable(value):
            value = await value
        return value

    async def dispatch(self, call: RawToolCall) -> ToolResult:
        """The result of one raw call; raises only ``_Escalation`` (and cancellation)."""
        tool = self.tools.get(call.name) if isinstance(call.name, str) else None
        if tool is None:
            names = self.tools.names
            available = ", ".join(names[:_NAMES_LISTED]) or "(none)"
            if len(names) > _NAMES_LISTED:
                available += f" and {len(names) - _NAMES_LISTED} more"
            return self._observation(
                "unknown_tool",
                f"No tool named {_shown_name(call.name)!r} in this run. "
                f"Available tools: {available}.",
                call,
                {"candidate_names": list(self.tools.names)},
            )
        parsed = parse_arguments(call.arguments_json)
        if parsed.arguments is None:
            return self._observation(
                "malformed_arguments",
                f"Arguments for tool {tool.name!r} are {parsed.problem}."
                " Send one JSON object matching the tool's parameters.",
                call,
                {"error_type": parsed.error_type, "arguments_size": len(str(call.arguments_json))},
            )
        try:
            # a tool that checks its own arguments (the MCP normalizer, whose one-line
            # "Missing required argument: <field>" is a contract) is not checked twice
            own_check = getattr(tool, "validates_arguments", False) is True
            problems = [] if own_check else check_arguments(tool, parsed.arguments)[1]
        except Exception as exc:  # a validator of the tool's own that crashed
            return self._stamped(ToolResult.from_exception(exc, tool=tool.name), call)
        if problems:
            return self._observation(
                "invalid_arguments",
                format_problems(problems),
                call,
                {"field_names": sorted({p.field or "arguments" for p in problems})},
            )
        if self.previous == (call.name, call.arguments_json):
            return self._observation(
                "repeated_tool_call",
                f"Tool {tool.name!r} was just called with these same arguments, so it was not "
                "run again. Use the result above, change the arguments, or answer.",
                call,
            )
        try:
            value = await self._run_tool(tool, parsed.arguments)
        except Exception as exc:  # Tool.call never raises: this is a ToolLike escalating
            record = FailureRecord.from_exception(
                exc,
                stage=Stage.EXECUTE,
                tool=call.name,
                step_id=call.id,
                evidence={"tool_call_id": call.id, "round": self.rounds},
            )
            raise _Escalation(exc, record, classify_exception(exc)) from exc
        convert = getattr(value, "to_tool_result", None)
        if callable(convert):  # a ToolLike's own result type (e.g. the MCP normalizer's)
            value = convert()
        if isinstance(value, ToolResult):
            return self._stamped(value, call) if value.is_error else value
        return ToolResult.ok(value)

    async def step(self, call: RawToolCall) -> None:
        """Dispatch one call and feed its result back; raises ``_Escalation`` to end the run."""
        await self.emit("step.started", Stage.TOOL_LOOP, tool=call.name, step_id=call.id)
        try:
            result = await self.dispatch(call)
        except _Escalation as escalation:
            failed = ToolResult.failure(
                escalation.classification.reason,
                escalation.record.message,
                record=escalation.record,
            )
            self.results.append(ToolCallResult(call, failed, self.rounds))
            raise
        invited_retry = result.is_error and result.error_code in RETRY_INVITING_REASONS
        self.previous = None if invited_retry else (call.name, call.arguments_json)
        self.results.append(ToolCallResult(call, result, self.rounds))
        self.transcript.append(
            ToolMessage(
                tool_call_id=call.id,
                name=call.name,
                content=result.to_model_text(),
                is_error=result.is_error,
            )
        )
        if result.is_error and result.record is not None:
            self.failures.append(result.record)
            await self.emit(
                "step.failed",
                result.record.stage,
                tool=call.name,
                step_id=call.id,
                metadata=failure_metadata(result.record),
            )
        else:
            await self.emit("step.completed", Stage.TOOL_LOOP, tool=call.name, step_id=call.id)

    # ---------------------------------------------------------------- the run

    async def end(
        self,
        status: LoopStatus,
        *,
        answer: str | None = None,
        record: FailureRecord | None = None,
        classification: Classification | None = None,
    ) -> LoopOutcome:
        if record is None:
            await self.emit("run.completed", Stage.TOOL_LOOP, metadata={"rounds": self.rounds})
        else:
            self.failures.append(record)
            await self.emit("run.failed", record.stage, metadata=failure_metadata(record))
        return LoopOutcome(
            status=status,
            answer=answer,
            transcript=tuple(self.transcript),
            tool_results=tuple(self.results),
            failures=tuple(self.failures),
            rounds=self.rounds,
            model_retries=self.model_retries,
            run_id=self.run_id,
            usage=dict(self.usage),
            classification=classification,
        )

    def _count(self, response: ModelResponse) -> None:
        self.model_retries += max(0, int(response.retries or 0))
        for key, amount in dict(response.usage or {}).items():
            if isinstance(amount, int):
                self.usage[key] = self.usage.get(key, 0) + amount

    async def run(self) -> LoopOutcome:
        await self.emit(
            "run.started",
            Stage.TOOL_LOOP,
            metadata={"max_rounds": self.max_rounds, "tool_names": list(self.tools.names)},
        )
        while self.rounds < self.max_rounds:
            self.rounds += 1
            try:
                response = await self.model.complete(tuple(self.transcript), self.specs)
            except Exception as exc:
                found = classify_exception(exc)
                self.model_retries += found.retried  # the retries of the call that failed
                record = FailureRecord.from_exception(
                    exc, stage=Stage.MODEL_CALL, evidence={"round": self.rounds}
                )
                return await self.end("model_error", record=record, classification=found)
            if not isinstance(response, ModelResponse):
                record = FailureRecord.of(
                    "invalid_model_response",
                    "The model adapter returned something other than a ModelResponse.",
                    evidence={"round": self.rounds, "error_type": type(response).__name__},
                )
                return await self.end("invalid_model_response", record=record)
            self._count(response)
            calls = tuple(response.tool_calls or ())
            await self.emit(
                "model.completed",
                Stage.MODEL_CALL,
                metadata={"tool_call_count": len(calls), "retries_count": response.retries},
            )
            self.transcript.append(AssistantMessage(content=response.content, tool_calls=calls))
            if not calls:
                text = response.content if isinstance(response.content, str) else ""
                if text.strip():
                    return await self.end("completed", answer=text)
                record = FailureRecord.of(
                    "invalid_model_response",
                    "The model answered with neither a tool call nor any text.",
                    evidence={
                        "round": self.rounds,
                        "content_present": response.content is not None,
                    },
                )
                return await self.end("invalid_model_response", record=record)
            for call in calls:
                try:
                    await self.step(call)
                except _Escalation as escalation:
                    return await self.end(
                        "tool_escalated",
                        record=escalation.record,
                        classification=escalation.classification,
                    )
        record = FailureRecord.of(
            "max_rounds_exceeded",
            f"No final answer after {self.max_rounds} rounds "
            f"({len(self.results)} tool calls, {len(self.failures)} failed).",
            evidence={
                "max_rounds": self.max_rounds,
                "rounds": self.rounds,
                "tool_call_count": len(self.results),
                "failed_call_count": len(self.failures),
            },
        )
        return await self.end("max_rounds_exceeded", record=record)


async def run_loop(
    model: Model,
    tools: ToolView | ToolRegistry,
    messages: str | Sequence[ChatMessage],
    *,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    on_event: EventHandler | None = None,
) -> LoopOutcome:
    """Run the tool loop until the model answers, fails, or ``max_rounds`` model calls pass.

    ``tools`` is the view of tools this run may use (a registry means all of its tools
    as they are now). ``messages`` is the transcript so far, or a prompt string (one user
    message). A round is one model call plus the tool calls it asked for, run in order;
    the tool calls of the last round run too (their results are in ``tool_results``)
    before the run ends ``max_rounds_exceeded``. Returns a ``LoopOutcome``; see the module
    docstring for what can end a run. ``max_rounds`` below 1 raises ``ValueError``.
    """
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise ValueError(f"max_rounds must be a positive integer, got {max_rounds!r}")
    view = tools.view() if isinstance(tools, ToolRegistry) else tools
    transcript: list[ChatMessage] = (
        [UserMessage(messages)] if isinstance(messages, str) else list(messages)
    )
    run = _Run(model, view, view.specs(), max_rounds, on_event, transcript=transcript)
    return await run.run()
