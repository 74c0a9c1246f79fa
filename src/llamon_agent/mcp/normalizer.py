"""MCP tool auto-protection: every failure of an MCP tool call becomes either
an observation the model can act on or one escalated, classified exception.

What ``MCPTool.call`` gives the model (``is_error=True``, the task goes on), with
``McpToolOutput.reason`` after the arrow:

* an argument missing (our schema check; the server is not called):
  ``Missing required argument: <field>`` -> invalid_arguments
* an argument of the wrong JSON type (likewise): ``Invalid argument type: <field> should
  be <type>, not <type>`` -> invalid_arguments
* the server's own argument validation rejected the call: ``Invalid argument: <field>:
  <message>`` (pydantic's text in one line, values dropped) -> invalid_arguments
* the tool raised ``ToolError``: ``Error executing tool <name>: <text>`` -> tool_error
* the tool crashed (any other exception): ``Error executing tool <name>`` -> tool_error
* transport failure #1 and #2 of this tool in this request (refused or closed
  connection, ``MCPError`` -32000/-32001, httpx2 errors, ``ConnectionError``, timeouts,
  exception groups of them): ``Upstream tool '<name>' temporarily unavailable. Retry may
  succeed.`` -> upstream_tool_unavailable

and what escalates (raised ``from`` the original; nothing is shown to the model):

* the 3rd transport failure of one tool in one request: ``MCPToolUnavailableError``
  (a ``ComponentInvokeError``, ``UPSTREAM_UNAVAILABLE``) or ``MCPToolTimeoutError`` (a
  ``TimeoutError``, ``UPSTREAM_TIMEOUT``), both retriable;
* an ``MCPError`` that is not a transport failure -- the server refused the request with a
  JSON-RPC error (no smarter model could have avoided it) -- at once:
  ``MCPProtocolError`` (``UPSTREAM_UNAVAILABLE`` / ``mcp_error``, not retriable);
* anything else the table classifies (``AUTH_REQUIRED`` for a 401, ``RATE_LIMITED`` for a
  429 ...) or does not (``INTERNAL_ERROR`` with an incident id) propagates unchanged.

Error texts are scrubbed (``core.scrub``) before the model sees them; successful output is
passed through as the tool returned it. Transport failures are counted per tool in a
``RequestBudget`` that lives for one request.

Runner events (stage ``mcp_call``, ``tool`` the tool's name), when someone listens
(``core.events.event_scope``): ``mcp.call`` after each call (``outcome``: ``ok``,
``is_error`` or ``invalid_arguments``, with ``failure_reason`` when not ok),
``mcp.transport_failure`` for each strike (``strike`` of ``limit``, the failure's reason
and code), ``mcp.escalated`` when the call raises one of the escalations above.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final

from llamon_agent._extras import requires_extra
from llamon_agent.core.classify import Classification, classify_exception
from llamon_agent.core.codes import ErrorCode, Stage
from llamon_agent.core.events import emit, failure_metadata, observed
from llamon_agent.core.failures import FailureRecord
from llamon_agent.core.faults import (
    FaultPlan,
    ToolRaises,
    ToolReturnsError,
    ToolSlow,
    ToolTimeout,
    active_faults,
)
from llamon_agent.core.scrub import scrub_text
from llamon_agent.loop.result import ToolResult
from llamon_agent.loop.validation import first_schema_problem
from llamon_agent.mcp.errors import MCPProtocolError, MCPToolTimeoutError, MCPToolUnavailableError
from llamon_agent.mcp.transport import is_transport_failure

with requires_extra("mcp", "llamon_agent.mcp"):
    from mcp.shared.exceptions import MCPError
    from mcp.types import (
        CONNECTION_CLOSED,
        REQUEST_TIMEOUT,
        AudioContent,
        CallToolResult,
        ContentBlock,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

if TYPE_CHECKING:
    from llamon_agent.loop.model import ToolSpec

__all__ = [
    "DEFAULT_MAX_TRANSPORT_FAILURES",
    "MCPTool",
    "McpToolOutput",
    "RequestBudget",
    "ToolCaller",
    "unavailable_text",
    "wrap_tool_output_normalizer",
]

logger = logging.getLogger("llamon_agent.mcp")

DEFAULT_MAX_TRANSPORT_FAILURES: Final = 3
"""Transport failures of one tool in one request; the last one escalates."""

_ERROR_TEXT_LIMIT: Final = 2000
_PLAIN_TYPES: Final = frozenset({str, bool, int, float, type(None), dict, list})
"""Values whose JSON type is their Python type's (no subclass, no tuple)."""
_MAX_VERDICTS: Final = 256
"""Argument shapes remembered per tool (forgotten all at once past this)."""

ToolCaller = Callable[[dict[str, Any]], Awaitable[CallToolResult]]
"""Calls the remote tool once: its arguments in, mcp's ``CallToolResult`` out, raising on a
transport or protocol failure (what ``mcp.Client.call_tool`` does)."""


def unavailable_text(name: str) -> str:
    """The observation for a transport failure below the threshold (a fixed text)."""
    return f"Upstream tool '{name}' temporarily unavailable. Retry may succeed."


@dataclass(frozen=True, slots=True)
class McpToolOutput:
    """What one MCP tool call gives back to the loop.

    ``text`` is what the model reads; ``is_error`` marks a failed call (an observation,
    the task goes on); ``structured`` is the tool's ``structuredContent`` on success;
    ``reason`` names the failure (``invalid_arguments``, ``tool_error``,
    ``upstream_tool_unavailable``) from the reason catalog, ``None`` on success.
    """

    text: str
    is_error: bool = False
    structured: Any = None
    reason: str | None = None

    @classmethod
    def failure(cls, text: str, reason: str) -> McpToolOutput:
        return cls(text=text, is_error=True, reason=reason)

    def to_tool_result(self) -> ToolResult:
        """The loop's ``ToolResult``: a failure keeps its exact text (no reason label)."""
        if self.is_error:
            return ToolResult.failure(self.reason or "tool_error", self.text, labelled=False)
        return ToolResult.ok(self.structured if self.structured is not None else self.text)


def _slot_setter(name: str) -> Callable[[McpToolOutput, object], None]:
    setter: Callable[[McpToolOutput, object], None] = getattr(McpToolOutput, name).__set__
    return setter


_set_text, _set_is_error, _set_structured, _set_reason = (
    _slot_setter(name) for name in ("text", "is_error", "structured", "reason")
)


def _ok_output(text: str, structured: Any) -> McpToolOutput:
    """``McpToolOutput(text=text, structured=structured)`` filled slot by slot (the
    frozen class's ``__init__`` costs more than the rest of a success)."""
    output: McpToolOutput = object.__new__(McpToolOutput)
    _set_text(output, text)
    _set_is_error(output, False)
    _set_structured(output, structured)
    _set_reason(output, None)
    return output


class RequestBudget:
    """Transport failures per tool within one request (reset every request).

    One budget belongs to one request: ``MCPToolLoader.session()`` makes a fresh one;
    share one explicitly (``loader.session(budget=b)``) when a request uses several MCP
    servers. ``record`` returns the count including this failure.
    """

    def __init__(self, max_transport_failures: int = DEFAULT_MAX_TRANSPORT_FAILURES) -> None:
        if max_transport_failures < 1:
            raise ValueError("max_transport_failures must be at least 1")
        self.max_transport_failures = max_transport_failures
        self._failures: dict[str, int] = {}

    def record(self, tool: str) -> int:
        """Count one transport failure of ``tool``; the new count."""
        count = self._failures.get(tool, 0) + 1
        self._failures[tool] = count
        return count

    def failures(self, tool: str) -> int:
        """Transport failures of ``tool`` so far in this request."""
        return self._failures.get(tool, 0)

    def exhausted(self, tool: str) -> bool:
        """True once ``tool`` has used up its failures (its next failure escalates too)."""
        return self.failures(tool) >= self.max_transport_failures

    def reset(self) -> None:
        """Forget every count (the start of a new request)."""
        self._failures.clear()

    def snapshot(self) -> dict[str, int]:
        """The counts, for logs and tests."""
        return dict(self._failures)

    def __repr__(self) -> str:
        return f"RequestBudget(max={self.max_transport_failures}, failures={self._failures})"


# "Error executing tool search_books: 1 validation error for search_booksArguments\n
#  limit\n  Input should be less than or equal to 20 [type=..., input_value=50, ...]\n
#    For further information visit https://errors.pydantic.dev/..."
_PYDANTIC_HEADER: Final = re.compile(
    r"^Error executing tool [^\n:]{1,200}: \d+ validation errors? for [^\n]{1,200}\n"
)
_PYDANTIC_ENTRY: Final = re.compile(
    r"^(\S[^\n]{0,200})\n {2}([^\n\[]{1,300}?)\s*(?:\[[^\n]*)?$", re.M
)


def _server_validation_line(text: str) -> str | None:
    """mcp's pydantic argument rejection as one line (values dropped); None if not one."""
    header = _PYDANTIC_HEADER.match(text)
    if header is None:
        return None
    entries = _PYDANTIC_ENTRY.findall(text[header.end() :])
    if not entries:
        return None
    return "; ".join(f"Invalid argument: {loc}: {message.strip()}" for loc, message in entries)


def _block_text(block: ContentBlock) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent):
        return f"[image: {block.mime_type}]"
    if isinstance(block, AudioContent):
        return f"[audio: {block.mime_type}]"
    if isinstance(block, EmbeddedResource):
        inner = block.resource
        if isinstance(inner, TextResourceContents):
            return inner.text
        return f"[resource: {inner.uri}]"
    if isinstance(block, ResourceLink):
        return f"[resource link: {block.uri}]"
    return f"[{getattr(block, 'type', 'content')}]"


def _result_text(result: CallToolResult) -> str:
    return "\n".join([_block_text(block) for block in result.content])


def _error_output(name: str, result: CallToolResult) -> McpToolOutput:
    raw = _result_text(result)
    if not raw.strip():
        return McpToolOutput.failure(f"Tool '{name}' failed without a message.", "tool_error")
    one_line = _server_validation_line(raw)
    if one_line is not None:
        return McpToolOutput.failure(scrub_text(one_line, max_length=500), "invalid_arguments")
    return McpToolOutput.failure(scrub_text(raw, max_length=_ERROR_TEXT_LIMIT), "tool_error")


def _success_output(result: CallToolResult) -> McpToolOutput:
    content = result.content
    if len(content) == 1 and type(content[0]) is TextContent:  # the common answer
        text = content[0].text
    else:
        text = _result_text(result)
    structured = result.structured_content
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False, default=str)
    return _ok_output(text, structured)


@dataclass(eq=False, slots=True)
class MCPTool:
    """One MCP tool as the tool loop sees it: ``name``, ``description``, ``parameters``
    (the input JSON schema) and ``call(arguments) -> McpToolOutput``.

    Made by ``wrap_tool_output_normalizer`` (``MCPToolLoader`` does it for every tool it
    loads). ``remote_name`` is the name on the server (``name`` may carry a prefix);
    ``budget`` counts this request's transport failures; ``server`` is the server's name
    (its ``mcp.json`` name, else the loader's label); ``mutating`` is False only for a
    tool whose annotations say ``readOnlyHint: true`` (MCP's default: a tool may have side
    effects).

    Under an active ``FaultPlan`` (``core.faults``) each call first asks the plan: a
    dropped connection of ``server`` (``mcp_connection_drop``) or a fault naming this
    tool fails the call the way the real failure does, at the point it would (see
    ``_injected``), so the strikes, escalations and events above are what a case sees.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    budget: RequestBudget
    _call: ToolCaller = field(repr=False)
    remote_name: str = ""
    output_schema: Mapping[str, Any] | None = None
    server: str = ""
    mutating: bool = True
    validates_arguments: ClassVar[bool] = True
    """The loop leaves argument checks to this tool (its one-line texts are a contract)."""
    _verdicts: dict[tuple[Any, ...], str | None] = field(
        default_factory=dict, init=False, repr=False
    )
    _verdicts_schema: Mapping[str, Any] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.remote_name:
            self.remote_name = self.name

    def _arguments_problem(self, arguments: dict[str, Any]) -> str | None:
        """``first_schema_problem(parameters, arguments)``, remembered per shape.

        The answer depends on the schema and, for a dict of plain JSON values, only on
        its keys in order and each value's type (and whether a float is integral): the
        checks stop at the top level. So the walker runs once per shape of arguments;
        other values (subclasses, tuples, other mappings) are always walked.
        """
        schema = self.parameters
        if type(arguments) is not dict:
            return first_schema_problem(schema, arguments)
        shape: list[tuple[str, object]] = []
        for key, value in arguments.items():
            kind = type(value)
            if kind not in _PLAIN_TYPES or type(key) is not str:
                return first_schema_problem(schema, arguments)
            # 3.0 is an integer to JSON Schema, 3.5 is not
            shape.append((key, value.is_integer() if kind is float else kind))
        signature = tuple(shape)
        verdicts = self._verdicts
        if self._verdicts_schema is not schema:  # new parameters: forget the old answers
            verdicts.clear()
            self._verdicts_schema = schema
        try:
            return verdicts[signature]
        except KeyError:
            pass
        problem = first_schema_problem(schema, arguments)
        if len(verdicts) >= _MAX_VERDICTS:
            verdicts.clear()
        verdicts[signature] = problem
        return problem

    def to_spec(self) -> ToolSpec:
        """The loop's ``ToolSpec`` of this tool (what the model is shown)."""
        from llamon_agent.loop.model import ToolSpec

        return ToolSpec(self.name, self.description, self.parameters)

    async def call(self, arguments: dict[str, Any]) -> McpToolOutput:
        """Call the tool; failures become observations or one escalated exception
        (see the module docstring)."""
        # one coroutine from the loop down to the remote call: every frame between them
        # is resumed each time the call wakes up
        try:
            problem = self._arguments_problem(arguments)
            if problem is not None:
                output = McpToolOutput.failure(problem, "invalid_arguments")
            else:
                try:
                    plan = active_faults()
                    injected = await self._injected(plan) if plan is not None else None
                    result = injected or await self._call(dict(arguments))
                except Exception as exc:
                    failure = self._call_failure(exc)
                    if failure is None:
                        raise
                    output = failure
                else:
                    output = (
                        _error_output(self.name, result)
                        if result.is_error
                        else _success_output(result)
                    )
        except (MCPProtocolError, MCPToolTimeoutError, MCPToolUnavailableError) as exc:
            if observed():
                record = FailureRecord.from_exception(exc, stage=Stage.MCP_CALL, tool=self.name)
                emit(
                    "mcp.escalated", record.stage, tool=self.name, metadata=failure_metadata(record)
                )
            raise
        if observed():
            metadata: dict[str, object] = {"outcome": "ok"}
            if output.is_error:
                metadata["outcome"] = (
                    "invalid_arguments" if output.reason == "invalid_arguments" else "is_error"
                )
                metadata["failure_reason"] = output.reason
            emit("mcp.call", Stage.MCP_CALL, tool=self.name, metadata=metadata)
        return output

    def _call_failure(self, exc: Exception) -> McpToolOutput | None:
        """What a remote call that raised ``exc`` gives: a transport failure's observation
        (or its escalation), a JSON-RPC refusal as ``MCPProtocolError``; ``None`` when
        ``exc`` itself goes on up."""
        found = classify_exception(exc)
        if is_transport_failure(found):
            return self._transport_failure(exc, found)
        refusal = found.exception
        if isinstance(refusal, MCPError):  # the host's to handle, not the model's
            raise MCPProtocolError(
                f"MCP server refused the call to tool '{self.name}' "
                f"(JSON-RPC error {refusal.code}).",
                mcp_code=refusal.code,
                tool=self.name,
            ) from exc
        return None

    async def _injected(self, plan: FaultPlan) -> CallToolResult | None:
        """A fault of ``plan`` at the remote call: raise what the real failure raises
        (mcp's ``MCPError`` -32000 for a dropped connection, -32001 for a read timeout,
        the handler's exception for a crash), return the server's ``isError`` answer for
        a tool error, or wait ``delay_ms`` and let the call go on (``None``)."""
        if plan.mcp_dropped(self.server):
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        fault = plan.for_tool(self.name)
        if isinstance(fault, ToolTimeout):
            raise MCPError(code=REQUEST_TIMEOUT, message="Request 'tools/call' timed out")
        if isinstance(fault, ToolRaises):
            raise RuntimeError(fault.message)
        if isinstance(fault, ToolReturnsError):
            return CallToolResult(
                content=[TextContent(type="text", text=fault.message)], is_error=True
            )
        if isinstance(fault, ToolSlow):
            await asyncio.sleep(fault.delay_ms / 1000)
        return None

    def _transport_failure(self, exc: Exception, found: Classification) -> McpToolOutput:
        count = self.budget.record(self.name)
        limit = self.budget.max_transport_failures
        logger.warning(
            "MCP tool %r transport failure %d/%d: %s (%s)",
            self.name,
            count,
            limit,
            found.reason,
            type(found.exception).__name__,
        )
        if observed():
            metadata: dict[str, object] = {
                "failure_reason": found.reason,
                "error_code": found.code.value,
                "retryable": found.retriable,
                "strike": count,
                "limit": limit,
            }
            emit("mcp.transport_failure", Stage.MCP_CALL, tool=self.name, metadata=metadata)
        if count < limit:
            return McpToolOutput.failure(unavailable_text(self.name), "upstream_tool_unavailable")
        message = (
            f"Upstream tool '{self.name}' failed {count} times in this request "
            f"({found.reason}); giving up."
        )
        if found.code is ErrorCode.UPSTREAM_TIMEOUT:
            raise MCPToolTimeoutError(message, tool=self.name, attempts=count) from exc
        raise MCPToolUnavailableError(
            message, reason=found.reason, tool=self.name, attempts=count
        ) from exc


def wrap_tool_output_normalizer(
    tool: Any,
    call: ToolCaller,
    *,
    budget: RequestBudget,
    name: str | None = None,
    server: str = "",
) -> MCPTool:
    """Wrap one remote MCP tool so each failure becomes an observation or one exception.

    ``tool`` is the server's tool description (``mcp.types.Tool``: ``name``,
    ``description``, ``input_schema``, ``output_schema``; any object with those works);
    ``call`` calls it once (see ``ToolCaller``); ``budget`` is this request's
    ``RequestBudget``; ``name`` renames it for the model (the server still gets its own);
    ``server`` names the server (what ``mcp_connection_drop`` faults name). The tool is
    ``mutating`` unless its ``annotations`` say ``read_only_hint`` (``readOnlyHint``) true.
    """
    remote_name = str(tool.name)
    schema = getattr(tool, "input_schema", None)
    output_schema = getattr(tool, "output_schema", None)
    annotations = getattr(tool, "annotations", None)
    read_only = getattr(annotations, "read_only_hint", None) is True
    return MCPTool(
        name=name or remote_name,
        description=str(getattr(tool, "description", None) or ""),
        parameters=schema if isinstance(schema, Mapping) else {"type": "object"},
        budget=budget,
        _call=call,
        remote_name=remote_name,
        output_schema=output_schema if isinstance(output_schema, Mapping) else None,
        server=server,
        mutating=not read_only,
    )
