"""``ToolDispatcher``: one raw tool call at a time, by the loop's rules.

``run_loop`` decides (call the model, end the run); this module runs the calls the model
wrote. The ReAct graph (``build_react_graph``) and the LangChain bridge
(``to_langchain_tools``) use the same dispatcher, so a call fails the same way, word for
word, wherever it runs::

    dispatcher = ToolDispatcher(registry.view("add_numbers"))
    done = await dispatcher.dispatch(tool_call("add_numbers", {"a": 2, "b": 3}, id="c1"))
    done.content                                   # "5": the message the model reads
    dispatcher.results[-1].result.value            # 5

Order of checks per call: look the name up in the view, parse ``arguments_json`` (here, at
the loop boundary -- never in a provider adapter), validate (unless the tool is a
``SelfValidatingTool``), block a repeat, stop a tool with side effects under a Quality
Lab guard, run, turn what the tool returned into a ``ToolResult`` (``ToolResult.of``).
Each failure is an observation: an ``is_error`` ``ToolMessage`` under the call's id, with
a ``FailureRecord`` naming the call and round:

=========================  =====================================================
reason                     when
=========================  =====================================================
``unknown_tool``           the name is not in the view
``malformed_arguments``    ``arguments_json`` is not one JSON object
``invalid_arguments``      the arguments break the tool's parameters
``repeated_tool_call``     the same name and raw arguments as the call just before
                           (in this dispatcher, across rounds): not run again
``side_effect_not_run``    a Quality Lab case in plan mode: a tool with side effects
                           (``has_side_effects``) is not run
``cleanup_not_configured`` a Quality Lab case without cleanup: a tool with side
                           effects is not run
``tool_error``             the tool's handler raised (or the tool's own failure)
=========================  =====================================================

The two guards apply only under a fault plan with a ``guard`` (``core.faults``); in a
normal run the check is one context-variable lookup.

A call is a repeat when its name and raw argument string equal those of the call just
before it, unless that call failed with a reason that invites a retry
(``RETRY_INVITING_REASONS``). A ``ToolLike`` whose ``call`` raises escalates: ``dispatch``
returns a ``ToolEscalation`` (the exception, its record and classification) instead of
a message, and the caller decides (``run_loop`` ends ``tool_escalated``; the ReAct graph
and the LangChain tools raise the exception). ``dispatch`` itself never raises (but for
cancellation).

Every call is recorded in ``results`` (an escalated one too, as a failed result) and
every observation's record in ``failures``; the ``step.started`` /
``step.completed`` / ``step.failed`` events go to the ``EventSink`` passed in (an
escalated call emits only ``step.started``).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from typing import Any, Final

from opentelemetry.trace import Span

from llamon_agent.core.catalog import reason_spec
from llamon_agent.core.classify import Classification, classify_exception
from llamon_agent.core.codes import Stage
from llamon_agent.core.failures import FailureRecord
from llamon_agent.core.faults import ToolGuard, active_faults
from llamon_agent.core.telemetry import mark_failed, reason_stage, record_tool_call, tool_span
from llamon_agent.loop._spans import idle_span
from llamon_agent.loop.events import EventSink, failure_metadata
from llamon_agent.loop.model import RawToolCall, ToolMessage
from llamon_agent.loop.outcome import ToolCallResult
from llamon_agent.loop.result import ToolResult
from llamon_agent.loop.tools import (
    SelfValidatingTool,
    Tool,
    ToolLike,
    ToolRegistry,
    ToolView,
    has_side_effects,
)
from llamon_agent.loop.validation import (
    FieldProblem,
    check_arguments,
    format_problems,
    parse_arguments,
    parsed_object,
)

__all__ = [
    "GUARD_REASONS",
    "RETRY_INVITING_REASONS",
    "UNKNOWN_TOOL",
    "ToolDispatcher",
    "ToolEscalation",
]

RETRY_INVITING_REASONS: Final = frozenset({"upstream_tool_unavailable"})
"""Failures whose text invites the model to retry the same call: not a repeated call."""

UNKNOWN_TOOL: Final = "(unknown)"
"""The tool name on the span and metric of a call to a tool not in the view."""

_GUARDED: Final[dict[ToolGuard, tuple[str, str]]] = {
    "plan": (
        "side_effect_not_run",
        "Tool {name!r} has side effects and was not run (plan mode). "
        "Answer with what you would do instead.",
    ),
    "no_cleanup": (
        "cleanup_not_configured",
        "Tool {name!r} has side effects and this case has no cleanup, so it was not run. "
        "Answer with what you would do instead.",
    ),
}
"""A fault plan's tool guard -> the reason and text of the call it stops."""

GUARD_REASONS: Final = frozenset(reason for reason, _ in _GUARDED.values())
"""The reasons of a tool call a fault plan's guard stopped before it ran."""

_NAME_SHOWN: Final = 64
_NAMES_LISTED: Final = 30


def _shown_name(name: object) -> str:
    """A model-written tool name, cut short for echoing back."""
    text = name if isinstance(name, str) else repr(name)
    return text if len(text) <= _NAME_SHOWN else text[:_NAME_SHOWN] + "…"


def _checks_own_arguments(tool: ToolLike) -> bool:
    """True for a ``SelfValidatingTool`` whose ``validates_arguments`` is ``True``."""
    if type(tool) is Tool:  # the common case, without a runtime protocol check: a Tool never
        return False  # declares it (its slots hold no such attribute)
    return isinstance(tool, SelfValidatingTool) and tool.validates_arguments is True


async def _run_tool(tool: ToolLike, arguments: dict[str, Any]) -> Any:
    value: Any = tool.call(arguments)
    if inspect.isawaitable(value):
        value = await value
    return value


@dataclass(frozen=True, slots=True)
class ToolEscalation:
    """A ``ToolLike``'s ``call`` raised ``exception``: the run cannot go on.

    ``record`` is its ``FailureRecord`` (stage ``execute``, the call's id and round in the
    evidence), ``classification`` what ``core.classify`` makes of the exception.
    """

    call: RawToolCall
    exception: Exception
    record: FailureRecord
    classification: Classification


class ToolDispatcher:
    """Runs raw tool calls against ``tools``, one at a time (see the module docstring).

    ``tools`` is the view the model was offered (a registry means all of its tools as
    they are now). ``events`` receives the ``step.*`` events (none by default).
    ``previous`` is the ``(name, arguments_json)`` of the call just before the first one
    (the repeat guard's memory, e.g. from the round before); None for a fresh run.
    """

    __slots__ = ("_failures", "_previous", "_results", "events", "tools")

    def __init__(
        self,
        tools: ToolView | ToolRegistry,
        *,
        events: EventSink | None = None,
        previous: tuple[str, str] | None = None,
    ) -> None:
        self.tools: ToolView = tools.view() if isinstance(tools, ToolRegistry) else tools
        self.events = events if events is not None else EventSink()
        self._previous = previous
        self._results: list[ToolCallResult] = []
        self._failures: list[FailureRecord] = []

    @property
    def results(self) -> tuple[ToolCallResult, ...]:
        """Every call dispatched so far, with its result and round, in order."""
        return tuple(self._results)

    @property
    def failures(self) -> tuple[FailureRecord, ...]:
        """The record of every failed call so far (observations; not escalations)."""
        return tuple(self._failures)

    @property
    def previous(self) -> tuple[str, str] | None:
        """The ``(name, arguments_json)`` the repeat guard compares the next call with."""
        return self._previous

    async def dispatch(
        self, call: RawToolCall, *, round_number: int = 1
    ) -> ToolMessage | ToolEscalation:
        """Run ``call`` (of round ``round_number``) and record it.

        Returns the ``ToolMessage`` the model reads (``is_error`` for a failure), or a
        ``ToolEscalation`` when the tool's ``call`` raised. Never raises (but for
        cancellation).
        """
        observed = self.events.observed  # (no event is built for no one)
        if observed:  # post, no coroutine without a handler (each tool call)
            pending = self.events.post(
                "step.started",
                Stage.TOOL_LOOP,
                round_number=round_number,
                tool=call.name,
                step_id=call.id,
            )
            if pending is not None:
                await pending
        tool = self.tools.get(call.name) if isinstance(call.name, str) else None
        name = call.name if tool is not None else UNKNOWN_TOOL  # a made-up name: not shown
        idle = idle_span()  # (a span started now would change nothing: not started)
        if idle is None:
            with tool_span(name, str(call.id)) as span:
                result = await self._result(call, tool, round_number)
                _observe(span, name, result)
        else:
            result = await self._result(call, tool, round_number)
            _observe(idle, name, result)
        if isinstance(result, ToolEscalation):
            failed = ToolResult.failure(
                result.classification.reason, result.record.message, record=result.record
            )
            self._results.append(ToolCallResult(call, failed, round_number))
            return result
        is_error = result.is_error
        invited_retry = is_error and result.error_code in RETRY_INVITING_REASONS
        self._previous = None if invited_retry else (call.name, call.arguments_json)
        self._results.append(ToolCallResult(call, result, round_number))
        failed_record = result.record if is_error else None
        if failed_record is not None:
            self._failures.append(failed_record)
        if observed:
            pending = self._step_ended(call, failed_record, round_number)
            if pending is not None:
                await pending
        return ToolMessage(
            tool_call_id=call.id,
            name=call.name,
            content=result.to_model_text(),
            is_error=is_error,
        )

    def _step_ended(
        self, call: RawToolCall, failed: FailureRecord | None, round_number: int
    ) -> Awaitable[None] | None:
        """Post ``step.completed`` or ``step.failed``; what is returned must be awaited."""
        if failed is None:
            pending = self.events.post(
                "step.completed",
                Stage.TOOL_LOOP,
                round_number=round_number,
                tool=call.name,
                step_id=call.id,
            )
        else:
            pending = self.events.post(
                "step.failed",
                failed.stage,
                round_number=round_number,
                tool=call.name,
                step_id=call.id,
                metadata=failure_metadata(failed),
            )
        return pending

    # ---------------------------------------------------------------- the checks, in order

    async def _result(
        self, call: RawToolCall, tool: ToolLike | None, round_number: int
    ) -> ToolResult | ToolEscalation:
        """The result of one raw call to ``tool`` (None: not in the view), or its
        escalation; never raises (but for cancellation)."""
        if tool is None:
            names = self.tools.names
            available = ", ".join(names[:_NAMES_LISTED]) or "(none)"
            if len(names) > _NAMES_LISTED:
                available += f" and {len(names) - _NAMES_LISTED} more"
            return _observation(
                "unknown_tool",
                f"No tool named {_shown_name(call.name)!r} in this run. "
                f"Available tools: {available}.",
                call,
                round_number,
                {"candidate_names": list(names)},
            )
        arguments = parsed_object(call.arguments_json)  # (the common case: no parse record)
        if arguments is None:
            parsed = parse_arguments(call.arguments_json)
            if parsed.arguments is None:
                return _observation(
                    "malformed_arguments",
                    f"Arguments for tool {tool.name!r} are {parsed.problem}."
                    " Send one JSON object matching the tool's parameters.",
                    call,
                    round_number,
                    {
                        "error_type": parsed.error_type,
                        "arguments_size": len(str(call.arguments_json)),
                    },
                )
            arguments = parsed.arguments
        values: dict[str, Any] | None = None  # what a Tool's handler gets (checked once)
        try:
            if _checks_own_arguments(tool):
                problems: tuple[FieldProblem, ...] = ()
            else:
                values, problems = check_arguments(tool, arguments)
        except Exception as exc:  # a validator of the tool's own that crashed
            return _stamped(ToolResult.from_exception(exc, tool=tool.name), call, round_number)
        if problems:
            return _observation(
                "invalid_arguments",
                format_problems(problems),
                call,
                round_number,
                {"field_names": sorted({p.field or "arguments" for p in problems})},
            )
        if self._previous == (call.name, call.arguments_json):
            return _observation(
                "repeated_tool_call",
                f"Tool {tool.name!r} was just called with these same arguments, so it was not "
                "run again. Use the result above, change the arguments, or answer.",
                call,
                round_number,
            )
        plan = active_faults()
        if plan is not None and plan.guard is not None and has_side_effects(tool):
            reason, text = _GUARDED[plan.guard]
            return _observation(reason, text.format(name=tool.name), call, round_number)
        try:
            if values is not None and type(tool) is Tool:  # Tool.call would check them again
                value = await tool.call_checked(values)
            else:
                value = await _run_tool(tool, arguments)
        except Exception as exc:  # Tool.call never raises: this is a ToolLike escalating
            record = FailureRecord.from_exception(
                exc,
                stage=Stage.EXECUTE,
                tool=call.name,
                step_id=call.id,
                evidence={"tool_call_id": call.id, "round": round_number},
            )
            return ToolEscalation(call, exc, record, classify_exception(exc))
        result = ToolResult.of(value)
        return _stamped(result, call, round_number) if result.is_error else result


def _observe(span: Span, tool: str, result: ToolResult | ToolEscalation) -> None:
    """A call's outcome on its span and in ``llamon.tool.calls`` (``core.telemetry``)."""
    if isinstance(result, ToolEscalation):
        found, stage = result.classification, result.record.stage
        mark_failed(span, reason=found.reason, error_code=found.code.value, stage=stage)
        record_tool_call(tool, "escalated", found.reason)
    elif result.is_error:
        record = result.record
        reason = record.reason if record is not None else result.error_code or "tool_error"
        code = record.error_code.value if record is not None else "INTERNAL_ERROR"
        stage = record.stage if record is not None else reason_stage(reason)
        mark_failed(span, reason=reason, error_code=code, stage=stage)
        record_tool_call(tool, "error", reason)
    else:
        record_tool_call(tool, "ok")


def _observation(
    reason: str,
    message: str,
    call: RawToolCall,
    round_number: int,
    evidence: dict[str, object] | None = None,
) -> ToolResult:
    """A failure the loop itself found, with a record naming the call."""
    record = FailureRecord.of(
        reason,
        message,
        tool=_shown_name(call.name),
        step_id=call.id,
        evidence={"tool_call_id": call.id, "round": round_number, **(evidence or {})},
    )
    return ToolResult.failure(reason, message, record=record)


def _stamped(result: ToolResult, call: RawToolCall, round_number: int) -> ToolResult:
    """A failed result with a record that names this call (made when the tool gave none)."""
    where = {"tool_call_id": call.id, "round": round_number}
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
