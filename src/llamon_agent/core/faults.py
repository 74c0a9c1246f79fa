"""Fault injection: the failures a Quality Lab case injects into one run, and the seams
that read them.

A ``FaultPlan`` holds a case's faults. ``fault_scope(plan)`` makes it the plan of the code
that runs inside (a context variable: tasks started inside inherit it); each seam of the
SDK asks ``active_faults()`` and, when a fault names it, fails the way the real failure
would, so the agent's code is not changed and the SDK's own handling (strikes, retries,
classification, partial results) is what the case observes:

========================  =======================  =========================================
fault ``kind``            seam                     what the seam does
========================  =======================  =========================================
``tool_timeout``          tool dispatch            the tool's call times out (every call)
``tool_raises``           tool dispatch            the tool's handler raises (every call)
``tool_error``            tool dispatch            the tool returns a tool error (every call)
``tool_slow``             tool dispatch            the tool answers after ``delay_ms``
``model_malformed_json``  model call               the model's next answer is a tool call
                                                   whose arguments are not JSON (once)
``model_empty_answer``    model call               the model's next answer is empty (once)
``model_rate_limited``    model call               the provider answers 429 with
                                                   ``Retry-After`` (once)
``model_server_error``    model call               the provider answers ``status`` (once)
``mcp_connection_drop``   MCP tool call            the server's connection drops after
                                                   ``after_calls`` calls (every later call)
``downstream_failed``     agent client             the agent answers a failed task
``downstream_unavailable`` agent client            the agent answers HTTP 503
``downstream_stream_drop`` agent client stream     the stream drops after ``after_events``
``task_store_fails_once`` task store               the next save fails (once)
========================  =======================  =========================================

A plan also carries a *tool guard*: ``"plan"`` (a plan-mode case: no tool with side
effects runs) or ``"no_cleanup"`` (an execute case without cleanup: a tool with side
effects is refused, ``cleanup_not_configured``). The tool dispatch seam applies it.

Every fault that fires is counted (``FaultPlan.fired``) and, inside an ``event_scope``,
announced as a ``lab.fault_injected`` runner event naming the fault's kind and target (no
other data), so a report can show which faults took effect.

Over A2A a plan travels in the request's metadata under ``FAULTS_METADATA_KEY``
(``FaultPlan.to_metadata`` / ``FaultPlan.from_metadata``); a server acts on it only when it
was started with fault injection allowed.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, Final, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from llamon_agent.core.events import emit
from llamon_agent.core.validation_errors import error_message, error_path

__all__ = [
    "FAULTS_EXTENSION_URI",
    "FAULTS_METADATA_KEY",
    "DownstreamFailed",
    "DownstreamFault",
    "DownstreamStreamDrop",
    "DownstreamUnavailable",
    "Fault",
    "FaultPlan",
    "McpConnectionDrop",
    "ModelEmptyAnswer",
    "ModelFault",
    "ModelMalformedJson",
    "ModelRateLimited",
    "ModelServerError",
    "TaskStoreFailsOnce",
    "ToolFault",
    "ToolGuard",
    "ToolRaises",
    "ToolReturnsError",
    "ToolSlow",
    "ToolTimeout",
    "active_faults",
    "fault_scope",
]

FAULTS_METADATA_KEY: Final = "llamon.lab/faults"
"""The request-metadata key a fault plan travels under over A2A."""

FAULTS_EXTENSION_URI: Final = "https://llamon.dev/extensions/lab-faults/v1"
"""The ``AgentExtension`` a server started with fault injection allowed declares in its
card: a caller checks it before sending a plan (a server without it ignores the key)."""

_Name = Annotated[str, Field(min_length=1)]


class _Fault(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    @property
    def target(self) -> str:
        """What the fault names (a tool, a server, an agent), or ``""``."""
        return ""


class _ToolFault(_Fault):
    tool: _Name
    """The tool's name as the model sees it."""

    @property
    def target(self) -> str:
        return self.tool


class ToolTimeout(_ToolFault):
    """The named tool times out."""

    kind: Literal["tool_timeout"]


class ToolRaises(_ToolFault):
    """The named tool raises an unexpected exception (a crash)."""

    kind: Literal["tool_raises"]
    message: str = "injected failure"


class ToolReturnsError(_ToolFault):
    """The named tool returns a tool error the model can read and act on."""

    kind: Literal["tool_error"]
    message: str = "injected tool error"


class ToolSlow(_ToolFault):
    """The named tool answers, but only after ``delay_ms``."""

    kind: Literal["tool_slow"]
    delay_ms: Annotated[int, Field(ge=1)]


class ModelMalformedJson(_Fault):
    """The model answers with JSON that does not parse."""

    kind: Literal["model_malformed_json"]


class ModelEmptyAnswer(_Fault):
    """The model answers with nothing."""

    kind: Literal["model_empty_answer"]


class ModelRateLimited(_Fault):
    """The model provider answers 429 with ``Retry-After``."""

    kind: Literal["model_rate_limited"]
    retry_after_ms: Annotated[int, Field(ge=0)] = 1000


class ModelServerError(_Fault):
    """The model provider answers with a 5xx status."""

    kind: Literal["model_server_error"]
    status: Annotated[int, Field(ge=500, le=599)] = 503


class McpConnectionDrop(_Fault):
    """The named MCP server's connection drops after ``after_calls`` calls."""

    kind: Literal["mcp_connection_drop"]
    server: _Name
    after_calls: Annotated[int, Field(ge=0)]

    @property
    def target(self) -> str:
        return self.server


class _DownstreamFault(_Fault):
    agent: _Name
    """The downstream agent: its card's name, or its URL."""

    @property
    def target(self) -> str:
        return self.agent


class DownstreamFailed(_DownstreamFault):
    """The named downstream agent answers with a failed task."""

    kind: Literal["downstream_failed"]


class DownstreamUnavailable(_DownstreamFault):
    """The named downstream agent answers HTTP 503."""

    kind: Literal["downstream_unavailable"]


class DownstreamStreamDrop(_DownstreamFault):
    """The named downstream agent's stream drops after ``after_events`` events."""

    kind: Literal["downstream_stream_drop"]
    after_events: Annotated[int, Field(ge=0)] = 1


class TaskStoreFailsOnce(_Fault):
    """The task store fails once."""

    kind: Literal["task_store_fails_once"]


ToolFault: TypeAlias = ToolTimeout | ToolRaises | ToolReturnsError | ToolSlow
ModelFault: TypeAlias = ModelMalformedJson | ModelEmptyAnswer | ModelRateLimited | ModelServerError
DownstreamFault: TypeAlias = DownstreamFailed | DownstreamUnavailable | DownstreamStreamDrop

Fault = Annotated[
    ToolTimeout
    | ToolRaises
    | ToolReturnsError
    | ToolSlow
    | ModelMalformedJson
    | ModelEmptyAnswer
    | ModelRateLimited
    | ModelServerError
    | McpConnectionDrop
    | DownstreamFailed
    | DownstreamUnavailable
    | DownstreamStreamDrop
    | TaskStoreFailsOnce,
    Field(discriminator="kind"),
]
"""One fault to inject, told apart by ``kind``."""

ToolGuard: TypeAlias = Literal["plan", "no_cleanup"]
"""``plan``: no tool with side effects runs; ``no_cleanup``: one that would is refused."""

_FAULTS: Final[TypeAdapter[list[Fault]]] = TypeAdapter(list[Fault])
_GUARDS: Final = ("plan", "no_cleanup")


class FaultPlan:
    """The faults of one run, and the count of those that fired.

    Thread-safe (a sync tool runs in a worker thread). Build it from the faults' models
    (``FaultPlan([ToolTimeout(kind="tool_timeout", tool="get_book")])``) or from request
    metadata (``from_metadata``).
    """

    __slots__ = ("_lock", "_mcp_calls", "_spent", "faults", "fired", "guard")

    def __init__(self, faults: Sequence[Fault] = (), *, guard: ToolGuard | None = None) -> None:
        if guard is not None and guard not in _GUARDS:
            raise ValueError(f"guard must be one of {_GUARDS}, got {guard!r}")
        self.faults: tuple[Fault, ...] = tuple(faults)
        self.guard: ToolGuard | None = guard
        self.fired: dict[str, int] = {}
        """``"kind:target"`` (``"kind"`` for a fault without target) -> times it fired."""
        self._spent: set[int] = set()
        self._mcp_calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        kinds = [fault.kind for fault in self.faults]
        return f"FaultPlan({kinds!r}, guard={self.guard!r})"

    def __bool__(self) -> bool:
        return bool(self.faults) or self.guard is not None

    # -- the seams' questions ----------------------------------------------------------

    def for_tool(self, name: str) -> ToolFault | None:
        """The fault for a call of tool ``name`` (every call), counted as fired."""
        for fault in self.faults:
            if (
                isinstance(fault, ToolTimeout | ToolRaises | ToolReturnsError | ToolSlow)
                and fault.tool == name
            ):
                self._fire(fault)
                return fault
        return None

    def for_model(self) -> ModelFault | None:
        """The fault for the next model call: each model fault fires once, in order."""
        with self._lock:
            for index, fault in enumerate(self.faults):
                if index in self._spent:
                    continue
                if isinstance(
                    fault,
                    ModelMalformedJson | ModelEmptyAnswer | ModelRateLimited | ModelServerError,
                ):
                    self._spent.add(index)
                    break
            else:
                return None
        self._fire(fault)
        return fault

    def mcp_dropped(self, server: str) -> bool:
        """Count one call to a tool of MCP server ``server``; true when its connection has
        dropped (the calls after ``after_calls``)."""
        for fault in self.faults:
            if isinstance(fault, McpConnectionDrop) and fault.server == server:
                with self._lock:
                    made = self._mcp_calls.get(server, 0)
                    self._mcp_calls[server] = made + 1
                if made >= fault.after_calls:
                    self._fire(fault)
                    return True
                return False
        return False

    def for_downstream(
        self, *names: str | None, kinds: Collection[str] | None = None
    ) -> DownstreamFault | None:
        """The fault for a call to the agent known by any of ``names`` (its card's name,
        its URL), every call; ``kinds``: only faults of these kinds (what the call can
        suffer: a ``message/send`` is not a stream)."""
        wanted = {name for name in names if name}
        for fault in self.faults:
            if (
                isinstance(fault, DownstreamFailed | DownstreamUnavailable | DownstreamStreamDrop)
                and (kinds is None or fault.kind in kinds)
                and (fault.agent in wanted or fault.agent.rstrip("/") in wanted)
            ):
                self._fire(fault)
                return fault
        return None

    def store_fails(self) -> bool:
        """True once (the first save asked about) when the plan has ``task_store_fails_once``."""
        with self._lock:
            for index, fault in enumerate(self.faults):
                if isinstance(fault, TaskStoreFailsOnce) and index not in self._spent:
                    self._spent.add(index)
                    break
            else:
                return False
        self._fire(fault)
        return True

    def _fire(self, fault: Fault) -> None:
        key = f"{fault.kind}:{fault.target}" if fault.target else fault.kind
        with self._lock:
            self.fired[key] = self.fired.get(key, 0) + 1
        metadata: dict[str, object] = {"fault": fault.kind}
        if fault.target:
            metadata["target"] = fault.target
        emit("lab.fault_injected", "lab", metadata=metadata)

    # -- over the wire ---------------------------------------------------------------

    def to_metadata(self) -> dict[str, Any]:
        """The plan as JSON-ready request metadata (the value of ``FAULTS_METADATA_KEY``)."""
        value: dict[str, Any] = {"faults": [fault.model_dump(mode="json") for fault in self.faults]}
        if self.guard is not None:
            value["guard"] = self.guard
        return value

    @classmethod
    def from_metadata(cls, value: object) -> FaultPlan:
        """The plan a request's metadata carries; ``ValueError`` naming what is wrong."""
        if not isinstance(value, Mapping):
            raise ValueError(f"{FAULTS_METADATA_KEY} must be an object")
        unknown = sorted(set(value) - {"faults", "guard"})
        if unknown:
            raise ValueError(f"{FAULTS_METADATA_KEY}: unknown field {unknown[0]!r}")
        guard = value.get("guard")
        if guard is not None and guard not in _GUARDS:
            raise ValueError(f"{FAULTS_METADATA_KEY}.guard must be 'plan' or 'no_cleanup'")
        try:
            faults = _FAULTS.validate_python(value.get("faults", []))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = error_path(["faults", *first["loc"]])
            raise ValueError(f"{FAULTS_METADATA_KEY}.{where}: {error_message(first)}") from None
        return cls(faults, guard=guard)


_current: ContextVar[FaultPlan | None] = ContextVar("llamon_fault_plan", default=None)


def active_faults() -> FaultPlan | None:
    """The plan of the code running now, or ``None`` (the common case: one lookup)."""
    return _current.get()


@contextmanager
def fault_scope(plan: FaultPlan | None) -> Iterator[FaultPlan | None]:
    """Make ``plan`` the active plan inside the block (``None``: no faults)."""
    token = _current.set(plan if plan else None)
    try:
        yield plan
    finally:
        _current.reset(token)
